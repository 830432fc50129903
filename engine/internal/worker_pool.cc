#include "engine/internal/worker_pool.h"

#include <pthread.h>

#include "engine/internal/thread_state.h"

namespace ember::engine::internal {

WorkerPool::WorkerPool(std::string name, int workers, std::unique_ptr<TaskQueue> queue, RunFn run)
    : name_(std::move(name)), queue_(std::move(queue)), run_(std::move(run)) {
  threads_.reserve(workers);
  for (int i = 0; i < workers; ++i) {
    threads_.emplace_back([this] { Loop(); });
    // Thread names show in debuggers and profilers; at most 15 characters.
    pthread_setname_np(threads_.back().native_handle(), name_.substr(0, 15).c_str());
  }
}

WorkerPool::~WorkerPool() { Stop(); }

void WorkerPool::Loop() {
  CurrentThread().is_worker = true;
  while (OprBlock* block = queue_->Pop()) run_(block);
}

void WorkerPool::Stop() {
  if (threads_.empty()) return;
  queue_->Close(static_cast<int>(threads_.size()));
  for (auto& thread : threads_) thread.join();
  threads_.clear();
}

void WorkerPool::AbandonAfterFork() {
  // pthread_detach on a handle copied from the parent only marks the copied
  // descriptor; the thread itself was never cloned into this process.
  for (auto& thread : threads_) thread.detach();
  threads_.clear();
}

}  // namespace ember::engine::internal
