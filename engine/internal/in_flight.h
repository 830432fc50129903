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
// Pacing: past `pace` pending ops a pusher polls (never sleeps) until the
// backlog has drained to three quarters of it. A backlog of tiny ops is
// memory the worker must fetch back from DRAM (65,536 ops are 32 MiB of op
// blocks); kept near `pace` it stays in cache. Measured on a 2-core VM: the
// cold random DAG of 1,000,000 ops ran at either 0.6-0.9M or 1.5-2.0M ops/s
// per process, the slow runs being those whose pusher got to the bound
// first; paced at 1,024, every run was fast. A backlog that does not drain
// (a long op, an op waiting for the pusher) is not paced: after
// `kPaceStall` without a finish the pusher goes on, and paces again only once
// an op has finished.
//
// Waiters register before they test the counts and finishers test for
// waiters after they count (all sequentially consistent), so either the
// finisher sees the waiter or the waiter sees the finish: no lost wake-up.
//
// Thread safety: thread-safe.

#include <atomic>
#include <cstdint>

#include <chrono>

#include "engine/base/mutex.h"

namespace ember::engine::internal {

class InFlight {
 public:
  // Pushers blocked on `bound` resume once pending has fallen to 3/4 of it;
  // `pace` (0: none) as above.
  InFlight(int64_t bound, int64_t pace);

  // Counts one op; with `may_block`, first waits while `bound` are pending
  // and paces past `pace`.
  void Admit(bool may_block);
  // Counts one op as finished, waking waiters at their thresholds.
  void Finish();
  // Blocks until no op is pending.
  void WaitIdle();

  [[nodiscard]] int64_t pending() const { return admitted_.load() - finished_.load(); }

 private:
  void WaitBelowBound();
  void Pace(int64_t admitted, int64_t finished);

  const int64_t bound_;
  const int64_t low_water_;
  const int64_t pace_;      // the bound when pacing is off
  const int64_t pace_low_;  // where a paced pusher resumes
  alignas(64) std::atomic<int64_t> admitted_{0};
  std::atomic<int64_t> finished_hint_{0};  // a past value of finished_
  std::atomic<int64_t> stalled_at_{-1};    // finished_ when pacing last gave up
  alignas(64) std::atomic<int64_t> finished_{0};
  alignas(64) std::atomic<int> idle_waiters_{0};
  std::atomic<int> bound_waiters_{0};
  Mutex mu_;
  CondVar cv_;
};

}  // namespace ember::engine::internal
