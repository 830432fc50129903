// A var's access queue: first in, first out across any number of chunks,
// each entry keeping its op and whether it writes; emptied, it holds no
// chunk, and a queue cleared with entries left frees them.

#include "engine/internal/access_queue.h"

#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "engine/internal/block_pool.h"

namespace ember::engine::internal {
namespace {

// Stand-ins for op blocks: the queue only stores and returns the pointers.
struct alignas(64) FakeBlock {
  char bytes[64];
};

OprBlock* AsBlock(FakeBlock& fake) { return reinterpret_cast<OprBlock*>(&fake); }

void Push(AccessQueue& queue, FakeBlock& fake, bool writes) {
  AccessQueue::Reserve(1);
  queue.Push(AsBlock(fake), writes ? Access::kWrite : Access::kRead);
}

void PushAll(AccessQueue& queue, std::vector<FakeBlock>& blocks, bool writes) {
  for (FakeBlock& fake : blocks) Push(queue, fake, writes);
}

// The front, removed; its chunk, if used up, freed at once.
AccessQueue::Entry Pop(AccessQueue& queue) {
  const AccessQueue::Entry front = queue.front();
  AccessQueue::Spent spent;
  queue.PopFront(&spent);
  return front;
}

void Clear(AccessQueue& queue) {
  AccessQueue::Spent spent;
  queue.Clear(&spent);
}

TEST(AccessQueueTest, FirstInFirstOutAcrossChunks) {
  std::vector<FakeBlock> blocks(40);
  AccessQueue queue;
  EXPECT_TRUE(queue.empty());
  for (std::size_t i = 0; i < blocks.size(); ++i) Push(queue, blocks[i], i % 3 == 0);
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    ASSERT_FALSE(queue.empty()) << "entry " << i;
    queue.PrefetchFront();
    const AccessQueue::Entry front = Pop(queue);
    EXPECT_EQ(front.block, AsBlock(blocks[i])) << "entry " << i;
    EXPECT_EQ(front.writes, i % 3 == 0) << "entry " << i;
  }
  EXPECT_TRUE(queue.empty());
}

// Pushes and pops interleaved at random, as a var's pusher and releasing
// worker take turns, against a std::vector model of the queue.
TEST(AccessQueueTest, InterleavedPushesAndPopsMatchAModel) {
  std::vector<FakeBlock> blocks(64);
  std::mt19937 rng(7);
  AccessQueue queue;
  std::vector<std::pair<OprBlock*, bool>> model;
  std::size_t model_front = 0;
  for (int step = 0; step < 20000; ++step) {
    const bool push = model_front == model.size() || rng() % 5 < 3;
    if (push) {
      FakeBlock& fake = blocks[rng() % blocks.size()];
      const bool writes = rng() % 2 == 0;
      Push(queue, fake, writes);
      model.emplace_back(AsBlock(fake), writes);
    } else {
      ASSERT_FALSE(queue.empty()) << "step " << step;
      const AccessQueue::Entry front = Pop(queue);
      ASSERT_EQ(front.block, model[model_front].first) << "step " << step;
      ASSERT_EQ(front.writes, model[model_front].second) << "step " << step;
      ++model_front;
    }
    ASSERT_EQ(queue.empty(), model_front == model.size()) << "step " << step;
  }
  Clear(queue);
  EXPECT_TRUE(queue.empty());
}

TEST(AccessQueueTest, ClearFreesWhatIsLeftAndTheQueueIsReusable) {
  std::vector<FakeBlock> blocks(20);
  AccessQueue queue;
  PushAll(queue, blocks, false);
  Clear(queue);
  EXPECT_TRUE(queue.empty());
  Push(queue, blocks[3], true);
  const AccessQueue::Entry front = Pop(queue);
  EXPECT_EQ(front.block, AsBlock(blocks[3]));
  EXPECT_TRUE(front.writes);
  EXPECT_TRUE(queue.empty());
}

// A queue dropped with entries left (a var table going away) frees its
// chunks itself; ASan's leak check is what sees it.
TEST(AccessQueueTest, DestroyedWithEntriesLeftFreesThem) {
  std::vector<FakeBlock> blocks(13);
  AccessQueue queue;
  PushAll(queue, blocks, true);
}

}  // namespace
}  // namespace ember::engine::internal
