#pragma once

// WorkerPool: threads that take ready ops from one TaskQueue and run them.
//
// Continuations: a worker that makes an op of its own pool ready runs it
// next itself instead of queueing it (FIFO pools only: it jumps the queue).
// GPU pools of the Async engines go one step further (`lend_streams`): a
// worker of any GPU pool of the same device runs a GPU op it made ready for
// another such pool too, on a stream of that pool, so a dependent chain of
// GPU ops is launched by one thread. The op still runs on its pool's stream
// (copies on copy streams, overlapping compute); only the host thread that
// issues it changes, which spares the queue hand-off, a wake-up and the CUDA
// driver's state moving between cores on every hop (measured: 4.2 us per
// hop from one thread, 5.8 from two taking turns). Not in the plain
// engines: there an op holds its thread until its GPU work is done, so a
// worker that took another pool's op would keep its own pool's ops waiting
// behind that pool's GPU work (compute behind copies), which is what
// separate pools exist to prevent.
//
// Startup: the constructor returns once every worker thread is running its
// loop (as MXNet's engine thread pools wait for theirs). A thread the
// runtime is still starting holds the runtime's locks for a moment (a
// sanitizer's allocator, filling the new thread's cache), and a fork() at
// that moment leaves them locked in the child, whose own threads then hang
// on them; seen under gcc's ASan in the fork test. A GPU worker makes its
// stream after that point, so engine creation does not wait for CUDA.
//
// Thread safety: Push is thread-safe; Stop and AbandonAfterFork are called
// once, by the owning engine.

#include <atomic>
#include <cstdint>
#include <functional>
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/internal/gpu_backend.h"
#include "engine/internal/task_queue.h"

namespace ember::engine::internal {

struct WorkerPoolOptions {
  bool continuations = false;
  // GPU pools: the device, and what makes a worker's stream when it starts.
  int gpu_device = -1;
  std::function<GpuStream()> make_stream = {};
  // Lets GPU workers of other pools of the device run this pool's ops as
  // their continuations, on this pool's streams.
  bool lend_streams = false;
};

class WorkerPool {
 public:
  using RunFn = std::function<void(OprBlock*)>;

  // Starts `workers` threads named `name` that call `run` on each op.
  WorkerPool(std::string name, int workers, std::unique_ptr<TaskQueue> queue, RunFn run,
             WorkerPoolOptions options = {});
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
  // What one worker ran, counted by its own thread (no sharing) and logged
  // at debug level when the pool stops: how often dependent ops were handed
  // between threads shows there, at no cost on the dispatch path.
  struct alignas(64) WorkerCounts {
    uint64_t popped = 0;     // taken from the queue
    uint64_t continued = 0;  // run as the continuation of the op before
    uint64_t yielded = 0;    // continuations queued to let a waiting op go first
  };
  void LogCounts() const;

  void Loop(int index);
  // What the calling worker runs next, after `*run` continuations in a row.
  OprBlock* NextOp(int* run, WorkerCounts& counts);
  bool TakeAsContinuation(OprBlock* block);
  // One of the workers' streams in turn, or none while a worker is starting.
  GpuStream LaneStream();

  const std::string name_;
  std::unique_ptr<TaskQueue> queue_;
  RunFn run_;
  const WorkerPoolOptions options_;
  std::vector<GpuStream> streams_;  // by worker; written before ready_ counts it
  std::atomic<int> ready_{0};
  std::atomic<uint32_t> turn_{0};
  std::vector<WorkerCounts> counts_;  // by worker
  std::latch started_;                // counted down as each worker starts
  std::vector<std::thread> threads_;
};

}  // namespace ember::engine::internal
