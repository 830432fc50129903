#include "engine/internal/in_flight.h"

#include <algorithm>

namespace ember::engine::internal {

InFlight::InFlight(int64_t bound)
    : bound_(bound), low_water_(std::max<int64_t>(1, bound * 3 / 4)) {}

void InFlight::Admit(bool may_block) {
  const int64_t admitted = admitted_.fetch_add(1) + 1;
  if (!may_block || admitted - finished_hint_.load(std::memory_order_relaxed) <= bound_) return;
  const int64_t finished = finished_.load();
  finished_hint_.store(finished, std::memory_order_relaxed);
  if (admitted - finished > bound_) WaitBelowBound();
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
