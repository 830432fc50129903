#pragma once

// DeferredChecks: the checks GPU ops left with OnComplete::WithCheck, until
// their GPU work is known done (engine.h).
//
// A check is kept with the op's fence, its name and the vars it wrote, each
// with the version the op's write gave it. Take(passed) hands out the checks
// whose fences `passed` says the GPU has passed (all of them after a full
// synchronize); the engine runs them and, for a failed one, records the
// error and leaves it on each of those vars that is still at that version.
// Checks are rare (ops that validate on the GPU), so one mutex suffices; an
// atomic count keeps the common "none pending" test off it.
//
// Thread safety: thread-safe.

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include <absl/functional/function_ref.h>

#include "engine/base/mutex.h"
#include "engine/engine.h"
#include "engine/internal/gpu_fence.h"

namespace ember::engine::internal {

class Var;

struct PendingCheck {
  struct Output {
    Var* var;
    uint32_t generation;  // of the var when the op wrote it
    uint64_t version;     // the var's version after the op's write
  };
  GpuFence fence;
  DeferredCheck check;
  std::string op;
  std::vector<Output> outputs;
};

class DeferredChecks {
 public:
  void Add(PendingCheck check);

  // The checks whose fences `passed` (or, with `all`, every check), in the
  // order they were added. Never blocks on the GPU.
  std::vector<PendingCheck> Take(absl::FunctionRef<bool(const GpuFence&)> passed, bool all);

  [[nodiscard]] bool empty() const { return count_.load(std::memory_order_acquire) == 0; }

 private:
  Mutex mu_;
  std::vector<PendingCheck> pending_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> count_{0};
};

}  // namespace ember::engine::internal
