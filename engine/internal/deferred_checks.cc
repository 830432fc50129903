#include "engine/internal/deferred_checks.h"

#include <utility>

namespace ember::engine::internal {

void DeferredChecks::Add(PendingCheck check) {
  MutexLock lock(&mu_);
  pending_.push_back(std::move(check));
  count_.store(static_cast<int64_t>(pending_.size()), std::memory_order_release);
}

std::vector<PendingCheck> DeferredChecks::Take(absl::FunctionRef<bool(const GpuFence&)> passed,
                                               bool all) {
  std::vector<PendingCheck> ready;
  if (empty()) return ready;
  MutexLock lock(&mu_);
  std::vector<PendingCheck> waiting;
  for (PendingCheck& check : pending_) {
    (all || passed(check.fence) ? ready : waiting).push_back(std::move(check));
  }
  pending_ = std::move(waiting);
  count_.store(static_cast<int64_t>(pending_.size()), std::memory_order_release);
  return ready;
}

}  // namespace ember::engine::internal
