#include "engine/internal/in_flight.h"

#include <algorithm>
#include <thread>

#include "engine/base/spin_lock.h"

namespace ember::engine::internal {

namespace {

// How long a paced pusher waits for a finish before it stops pacing: a
// backlog of ops short enough for pacing to matter finishes one in well under
// a microsecond.
constexpr auto kPaceStall = std::chrono::microseconds(20);
// Pauses between two reads of the finishers' counter: each read pulls its
// cache line from the finishing worker.
constexpr int kPacePauses = 16;

}  // namespace

InFlight::InFlight(int64_t bound, int64_t pace)
    : bound_(bound),
      low_water_(std::max<int64_t>(1, bound * 3 / 4)),
      pace_(pace > 0 ? std::min(pace, bound) : bound),
      pace_low_(std::max<int64_t>(1, pace_ * 3 / 4)) {}

void InFlight::Admit(bool may_block) {
  const int64_t admitted = admitted_.fetch_add(1) + 1;
  if (!may_block || admitted - finished_hint_.load(std::memory_order_relaxed) <= pace_) return;
  const int64_t finished = finished_.load();
  finished_hint_.store(finished, std::memory_order_relaxed);
  if (admitted - finished > bound_) {
    WaitBelowBound();
  } else if (admitted - finished > pace_) {
    Pace(admitted, finished);
  }
}

void InFlight::Pace(int64_t admitted, int64_t finished) {
  if (stalled_at_.load(std::memory_order_relaxed) == finished) return;  // still stalled
  const int64_t target = admitted - pace_low_;
  auto last_finish = std::chrono::steady_clock::now();
  while (finished < target) {
    for (int i = 0; i < kPacePauses; ++i) CpuRelax();
    const int64_t now_finished = finished_.load(std::memory_order_relaxed);
    const auto now = std::chrono::steady_clock::now();
    if (now_finished != finished) {
      finished = now_finished;
      last_finish = now;
    } else if (now - last_finish > kPaceStall) {
      stalled_at_.store(finished, std::memory_order_relaxed);
      break;
    }
    std::this_thread::yield();  // for a worker that shares this core
  }
  finished_hint_.store(finished, std::memory_order_relaxed);
}

void InFlight::WaitBelowBound() {
  bound_waiters_.fetch_add(1);
  {
    MutexLock lock(&mu_);
    while (pending() > low_water_) cv_.Wait(&mu_);
  }
  finished_hint_.store(finished_.load(), std::memory_order_relaxed);
  bound_waiters_.fetch_sub(1);
}

void InFlight::Finish() {
  const int64_t finished = finished_.fetch_add(1) + 1;
  const bool idle_waiter = idle_waiters_.load() > 0;
  const bool bound_waiter = bound_waiters_.load() > 0;
  if (!idle_waiter && !bound_waiter) return;
  const int64_t pending = admitted_.load() - finished;
  if ((idle_waiter && pending == 0) || (bound_waiter && pending <= low_water_)) {
    MutexLock lock(&mu_);
    cv_.SignalAll();
  }
}

void InFlight::WaitIdle() {
  idle_waiters_.fetch_add(1);
  {
    MutexLock lock(&mu_);
    while (pending() != 0) cv_.Wait(&mu_);
  }
  idle_waiters_.fetch_sub(1);
}

}  // namespace ember::engine::internal
