#pragma once

// InFlight: counts an engine's pushed-but-unfinished ops, blocks pushers past
// a bound and lets threads wait until none is left.
//
// The counter is split in two so that the pushing thread and the finishing
// worker do not fight over one cache line on every op: pushers add to
// admitted_, finishers to finished_, and pending = admitted_ - finished_.
// A pusher reads finished_ only when its last reading no longer proves the
// bound holds (finished_ only grows, so an old reading is a safe estimate).
//
// Waiters register before they test the counts and finishers test for
// waiters after they count (all sequentially consistent), so either the
// finisher sees the waiter or the waiter sees the finish: no lost wake-up.
//
// Thread safety: thread-safe.

#include <atomic>
#include <cstdint>

#include "engine/base/mutex.h"

namespace ember::engine::internal {

class InFlight {
 public:
  // Pushers blocked on `bound` resume once pending has fallen to 3/4 of it.
  explicit InFlight(int64_t bound);

  // Counts one op; with `may_block`, first waits while `bound` are pending.
  void Admit(bool may_block);
  // Counts one op as finished, waking waiters at their thresholds.
  void Finish();
  // Blocks until no op is pending.
  void WaitIdle();

  [[nodiscard]] int64_t pending() const { return admitted_.load() - finished_.load(); }

 private:
  void WaitBelowBound();

  const int64_t bound_;
  const int64_t low_water_;
  alignas(64) std::atomic<int64_t> admitted_{0};
  std::atomic<int64_t> finished_hint_{0};  // a past value of finished_
  alignas(64) std::atomic<int64_t> finished_{0};
  alignas(64) std::atomic<int> idle_waiters_{0};
  std::atomic<int> bound_waiters_{0};
  Mutex mu_;
  CondVar cv_;
};

}  // namespace ember::engine::internal
