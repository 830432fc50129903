#pragma once

// WorkerPool: threads that take ready ops from one TaskQueue and run them.
//
// Thread safety: Push is thread-safe; Stop and AbandonAfterFork are called
// once, by the owning engine.

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/internal/task_queue.h"

namespace ember::engine::internal {

class WorkerPool {
 public:
  using RunFn = std::function<void(OprBlock*)>;

  // Starts `workers` threads named `name` that call `run` on each op. With
  // `continuations`, a worker that makes an op of this pool ready runs it
  // next itself instead of queueing it (FIFO pools only: it jumps the queue).
  WorkerPool(std::string name, int workers, std::unique_ptr<TaskQueue> queue, RunFn run,
             bool continuations, std::function<void()> on_thread_start = {});
  ~WorkerPool();  // Stop()s if not yet stopped
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Queues `block`, or with `continuation` (see Executor::Dispatch) keeps it
  // for the calling worker to run next.
  void Push(OprBlock* block, bool continuation = false);

  // Lets the workers finish what is queued, then joins them.
  void Stop();

  // In a child after fork() the threads do not exist: forget them (detach
  // the stale handles) so nothing waits for them.
  void AbandonAfterFork();

 private:
  void Loop();

  const std::string name_;
  std::unique_ptr<TaskQueue> queue_;
  RunFn run_;
  const bool continuations_;
  const std::function<void()> on_thread_start_;  // e.g. make the worker's CUDA stream
  std::vector<std::thread> threads_;
};

}  // namespace ember::engine::internal
