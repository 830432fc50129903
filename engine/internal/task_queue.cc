#include "engine/internal/task_queue.h"

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
    if (spin_.count() > 0 && Poll(&block)) return block;
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
  // Polls for up to spin_; reads the clock once per kPollsPerClock tries.
  bool Poll(OprBlock** block) {
    constexpr int kPollsPerClock = 64;
    const auto deadline = std::chrono::steady_clock::now() + spin_;
    do {
      for (int i = 0; i < kPollsPerClock; ++i) {
        if (queue_.try_dequeue(*block)) return true;
      }
    } while (std::chrono::steady_clock::now() < deadline);
    return false;
  }

  const std::chrono::microseconds spin_;
  moodycamel::BlockingConcurrentQueue<OprBlock*> queue_;
};

class PriorityQueue final : public TaskQueue {
 public:
  void Push(OprBlock* block) override {
    MutexLock lock(&mu_);
    heap_.push(block);
    cv_.Signal();
  }
  OprBlock* Pop() override {
    MutexLock lock(&mu_);
    while (heap_.empty() && closing_ == 0) cv_.Wait(&mu_);
    if (!heap_.empty()) {
      OprBlock* block = heap_.top();
      heap_.pop();
      return block;
    }
    --closing_;
    return nullptr;
  }
  OprBlock* TryPop() override {
    MutexLock lock(&mu_);
    if (heap_.empty()) return nullptr;
    OprBlock* block = heap_.top();
    heap_.pop();
    return block;
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
  Mutex mu_;
  CondVar cv_;
  std::priority_queue<OprBlock*, std::vector<OprBlock*>, Lower> heap_ ABSL_GUARDED_BY(mu_);
  int closing_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace

std::unique_ptr<TaskQueue> MakeFifoQueue(std::chrono::microseconds spin) {
  return std::make_unique<FifoQueue>(spin);
}
std::unique_ptr<TaskQueue> MakePriorityQueue() { return std::make_unique<PriorityQueue>(); }

}  // namespace ember::engine::internal
