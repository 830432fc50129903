#pragma once

// Executor: the part of an engine type that decides where a ready op runs.
// The dependency tracking is the same for every type (DependencyEngine);
// the types differ only here:
//   NaiveEngine              every op runs at once, on the thread that
//                            makes it ready (the pusher, in practice)
//   ThreadedEngine           one shared pool, FIFO, CPU and GPU ops alike;
//                            each worker has its own stream per GPU, so GPU
//                            ops spread over the workers' streams
//   ThreadedEnginePerDevice  a normal CPU pool (FIFO), a CPU priority pool
//                            (highest priority first) for kCPUPrioritized
//                            ops, and per GPU a normal pool, a copy-in pool
//                            (kCopyToGPU), a copy-out pool (kCopyFromGPU)
//                            and a priority pool (kGPUPrioritized), every
//                            GPU worker with a stream of its own
//
// Thread safety: Dispatch and CheckContext are thread-safe.

#include <functional>
#include <memory>
#include <string_view>

#include "engine/context.h"
#include "engine/engine_options.h"
#include "engine/internal/gpu_backend.h"

namespace ember::engine::internal {

struct OprBlock;

class Executor {
 public:
  using RunFn = std::function<void(OprBlock*)>;
  // Called on each GPU worker thread as it starts, with its device and its
  // pool's rank: makes the thread's stream.
  using GpuThreadInit = std::function<GpuStream(int device, StreamRank rank)>;
  virtual ~Executor() = default;

  explicit Executor(int gpus) : gpus_(gpus) {}

  // Throws Unavailable when `ctx` names a GPU this engine does not have.
  void CheckContext(Context ctx, std::string_view where, std::string_view op) const;

  // Runs `block` now or hands it to a worker. `continuation`: the calling
  // thread made `block` ready by finishing its own op, and (if it is a
  // worker of the pool that would take `block`) may run it next itself.
  virtual void Dispatch(OprBlock* block, bool continuation) = 0;

  // True when Dispatch runs the op on the calling thread.
  [[nodiscard]] virtual bool inline_dispatch() const { return false; }

  // Joins the workers once their queues are empty.
  virtual void Stop() {}
  // Forgets the workers in a child after fork() (they do not exist there).
  virtual void AbandonAfterFork() {}

 private:
  const int gpus_;
};

// An executor for options.type with workers for `gpus` GPUs.
// `gpu_thread_init` prepares a GPU worker thread (its stream) before its
// first op, so that no op pays for it.
std::unique_ptr<Executor> MakeExecutor(const EngineOptions& options, int gpus, Executor::RunFn run,
                                       const Executor::GpuThreadInit& gpu_thread_init);

}  // namespace ember::engine::internal
