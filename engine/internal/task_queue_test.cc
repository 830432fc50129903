// Task queues: the priority queue hands out the highest priority first and
// keeps push order among equal priorities; spinning FIFO and priority
// queues hand over ops pushed while they poll and after their consumer went
// to sleep, and close.

#include "engine/internal/task_queue.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/internal/opr_block.h"

namespace ember::engine {
namespace {

TEST(PriorityQueueTest, HighestPriorityFirstThenPushOrder) {
  auto queue = internal::MakePriorityQueue();
  auto* op = new internal::Operator(AsyncFn(), {}, OpAttrs{});
  std::vector<std::unique_ptr<internal::OprBlock, internal::OprBlock::Deleter>> blocks;
  const int priorities[] = {0, 5, -3, 5, 0, 9};
  for (int i = 0; i < 6; ++i) {
    op->Ref();
    blocks.emplace_back(internal::OprBlock::New(nullptr, op, Context::CPU(), priorities[i]));
    blocks.back()->seq = i;
    queue->Push(blocks.back().get());
  }
  std::vector<uint64_t> order;
  for (int i = 0; i < 6; ++i) order.push_back(queue->Pop()->seq);
  EXPECT_EQ(order, (std::vector<uint64_t>{5, 1, 3, 0, 4, 2}));
  queue->Close(1);
  EXPECT_EQ(queue->Pop(), nullptr);
  op->Unref();
}

TEST(FifoQueueTest, SpinningQueueDeliversWhilePollingAndAfterSleeping) {
  auto queue = internal::MakeFifoQueue(std::chrono::microseconds(2000));
  auto* op = new internal::Operator(AsyncFn(), {}, OpAttrs{});
  std::vector<std::unique_ptr<internal::OprBlock, internal::OprBlock::Deleter>> blocks;
  for (int i = 0; i < 3; ++i) {
    op->Ref();
    blocks.emplace_back(internal::OprBlock::New(nullptr, op, Context::CPU(), 0));
    blocks.back()->seq = i;
  }
  std::vector<uint64_t> got;
  std::atomic<int> taken{0};
  std::thread consumer([&] {
    while (internal::OprBlock* block = queue->Pop()) got.push_back(block->seq), ++taken;
  });
  // Each push waits for the one before to be taken (on a loaded machine
  // the consumer may start late; then the priority queue would rightly
  // hand out the higher priority first).
  queue->Push(blocks[0].get());
  while (taken.load() < 1) std::this_thread::yield();
  queue->Push(blocks[1].get());  // taken while polling: the consumer just popped
  while (taken.load() < 2) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the consumer sleeps now
  queue->Push(blocks[2].get());
  queue->Close(1);
  consumer.join();
  EXPECT_EQ(got, (std::vector<uint64_t>{0, 1, 2}));
  op->Unref();
}

TEST(PriorityQueueTest, SpinningQueueDeliversWhilePollingAndAfterSleeping) {
  auto queue = internal::MakePriorityQueue(std::chrono::microseconds(2000));
  auto* op = new internal::Operator(AsyncFn(), {}, OpAttrs{});
  std::vector<std::unique_ptr<internal::OprBlock, internal::OprBlock::Deleter>> blocks;
  for (int i = 0; i < 3; ++i) {
    op->Ref();
    blocks.emplace_back(internal::OprBlock::New(nullptr, op, Context::CPU(), i));
    blocks.back()->seq = i;
  }
  std::vector<uint64_t> got;
  std::atomic<int> taken{0};
  std::thread consumer([&] {
    while (internal::OprBlock* block = queue->Pop()) got.push_back(block->seq), ++taken;
  });
  // Each push waits for the one before to be taken (on a loaded machine
  // the consumer may start late; then the priority queue would rightly
  // hand out the higher priority first).
  queue->Push(blocks[0].get());
  while (taken.load() < 1) std::this_thread::yield();
  queue->Push(blocks[1].get());  // taken while polling: the consumer just popped
  while (taken.load() < 2) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the consumer sleeps now
  queue->Push(blocks[2].get());
  queue->Close(1);
  consumer.join();
  EXPECT_EQ(got, (std::vector<uint64_t>{0, 1, 2}));
  op->Unref();
}

}  // namespace
}  // namespace ember::engine
