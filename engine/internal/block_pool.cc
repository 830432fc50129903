#include "engine/internal/block_pool.h"

#include <new>
#include <vector>

#include <concurrentqueue/concurrentqueue.h>

namespace ember::engine::internal {
namespace {

constexpr std::size_t kBatch = 32;
constexpr std::size_t kMaxShared = 1 << 14;

moodycamel::ConcurrentQueue<void*>& Shared() {
  // Leaked on purpose: blocks may be freed during static destruction.
  static auto* const shared = new moodycamel::ConcurrentQueue<void*>(1024);
  return *shared;
}

// Holds at most 2 * kBatch blocks; hands the older half to the shared queue.
class ThreadCache {
 public:
  ~ThreadCache() {
    for (void* block : blocks_) Release(block);
  }

  void* Take(std::size_t size) {
    if (blocks_.empty()) Refill();
    if (blocks_.empty()) return ::operator new(size);
    void* block = blocks_.back();
    blocks_.pop_back();
    return block;
  }

  void Put(void* block) {
    if (blocks_.size() == 2 * kBatch) Spill();
    blocks_.push_back(block);
  }

 private:
  void Refill() {
    void* batch[kBatch];
    const std::size_t got = Shared().try_dequeue_bulk(batch, kBatch);
    blocks_.insert(blocks_.end(), batch, batch + got);
  }

  void Spill() {
    if (Shared().size_approx() < kMaxShared && Shared().enqueue_bulk(blocks_.begin(), kBatch)) {
      blocks_.erase(blocks_.begin(), blocks_.begin() + kBatch);
      return;
    }
    for (std::size_t i = 0; i < kBatch; ++i) ::operator delete(blocks_[i]);
    blocks_.erase(blocks_.begin(), blocks_.begin() + kBatch);
  }

  static void Release(void* block) {
    if (Shared().size_approx() >= kMaxShared || !Shared().enqueue(block)) ::operator delete(block);
  }

  std::vector<void*> blocks_;
};

ThreadCache& Cache() {
  thread_local ThreadCache cache;
  return cache;
}

}  // namespace

void* BlockPool::Allocate(std::size_t size) { return Cache().Take(size); }

void BlockPool::Free(void* memory) { Cache().Put(memory); }

}  // namespace ember::engine::internal
