#include "engine/internal/task_queue.h"

#include <atomic>

#include <concurrentqueue/blockingconcurrentqueue.h>

#include "engine/internal/opr_block.h"

namespace ember::engine::internal {
namespace {

class FifoQueue final : public TaskQueue {
 public:
  explicit FifoQueue(std::chrono::microseconds spin) : spin_(spin) {}
  void Push(OprBlock* block) override { queue_.enqueue(block); }
  OprBlock* Pop() override {
    OprBlock* block = nullptr;
    if (PollFor(spin_, [&] { return queue_.try_dequeue(block); })) return block;
    queue_.wait_dequeue(block);
    return block;
  }
  OprBlock* TryPop() override {
    OprBlock* block = nullptr;
    if (!queue_.try_dequeue(block)) return nullptr;
    if (block == nullptr) queue_.enqueue(nullptr);  // a Close marker: leave it for Pop
    return block;
  }
  // A null entry per consumer: each worker exits on the first it takes.
  void Close(int consumers) override {
    for (int i = 0; i < consumers; ++i) queue_.enqueue(nullptr);
  }

 private:
  const std::chrono::microseconds spin_;
  moodycamel::BlockingConcurrentQueue<OprBlock*> queue_;
};

// A heap under a mutex. Pop polls `size_` (an atomic mirror of the heap's
// size) before it takes the lock, and Push signals only when a consumer
// sleeps, so neither side goes through the kernel while ops keep coming.
class PriorityQueue final : public TaskQueue {
 public:
  explicit PriorityQueue(std::chrono::microseconds spin) : spin_(spin) {}

  void Push(OprBlock* block) override {
    MutexLock lock(&mu_);
    heap_.push(block);
    size_.store(heap_.size(), std::memory_order_release);
    if (sleepers_ > 0) cv_.Signal();
  }
  OprBlock* Pop() override {
    PollFor(spin_, [&] { return size_.load(std::memory_order_acquire) > 0; });
    MutexLock lock(&mu_);
    while (heap_.empty() && closing_ == 0) {
      ++sleepers_;
      cv_.Wait(&mu_);
      --sleepers_;
    }
    if (!heap_.empty()) return PopLocked();
    --closing_;
    return nullptr;
  }
  OprBlock* TryPop() override {
    MutexLock lock(&mu_);
    return heap_.empty() ? nullptr : PopLocked();
  }
  void Close(int consumers) override {
    MutexLock lock(&mu_);
    closing_ += consumers;
    cv_.SignalAll();
  }

 private:
  struct Lower {
    bool operator()(const OprBlock* a, const OprBlock* b) const {
      if (a->priority != b->priority) return a->priority < b->priority;
      return a->seq > b->seq;
    }
  };
  OprBlock* PopLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    OprBlock* block = heap_.top();
    heap_.pop();
    size_.store(heap_.size(), std::memory_order_release);
    return block;
  }

  const std::chrono::microseconds spin_;
  std::atomic<std::size_t> size_{0};
  Mutex mu_;
  CondVar cv_;
  std::priority_queue<OprBlock*, std::vector<OprBlock*>, Lower> heap_ ABSL_GUARDED_BY(mu_);
  int closing_ ABSL_GUARDED_BY(mu_) = 0;
  int sleepers_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace

std::unique_ptr<TaskQueue> MakeFifoQueue(std::chrono::microseconds spin) {
  return std::make_unique<FifoQueue>(spin);
}
std::unique_ptr<TaskQueue> MakePriorityQueue(std::chrono::microseconds spin) {
  return std::make_unique<PriorityQueue>(spin);
}

}  // namespace ember::engine::internal
