#pragma once

// Executor: the part of an engine type that decides where a ready op runs.
// The dependency tracking is the same for every type (DependencyEngine);
// the types differ only here:
//   NaiveEngine              every op runs at once, on the thread that
//                            makes it ready (the pusher, in practice)
//   ThreadedEngine           one shared pool, FIFO
//   ThreadedEnginePerDevice  a normal CPU pool (FIFO) and a CPU priority
//                            pool (highest priority first) for
//                            kCPUPrioritized ops
// GPU contexts get their workers with the GPU engine; until then a GPU
// context is refused at push time by CheckContext.
//
// Thread safety: Dispatch and CheckContext are thread-safe.

#include <functional>
#include <memory>
#include <string_view>

#include "engine/context.h"
#include "engine/engine_options.h"

namespace ember::engine::internal {

struct OprBlock;

class Executor {
 public:
  using RunFn = std::function<void(OprBlock*)>;
  virtual ~Executor() = default;

  // Throws Unavailable when this executor cannot run ops on `ctx`.
  virtual void CheckContext(Context ctx, std::string_view where, std::string_view op) const;

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
};

std::unique_ptr<Executor> MakeExecutor(const EngineOptions& options, Executor::RunFn run);

}  // namespace ember::engine::internal
