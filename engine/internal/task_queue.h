#pragma once

// TaskQueue: where ready ops wait for a worker. FifoQueue serves normal pools
// in dispatch order (lock-free, moodycamel); PriorityQueue serves priority
// pools, highest priority first and in push order among equals.
//
// Thread safety: thread-safe. Pop blocks; a null result means closed.

#include <chrono>
#include <cstdint>
#include <memory>
#include <queue>
#include <thread>
#include <vector>

#include "engine/base/mutex.h"
#include "engine/base/spin_lock.h"

namespace ember::engine::internal {

struct OprBlock;

class TaskQueue {
 public:
  virtual ~TaskQueue() = default;
  virtual void Push(OprBlock* block) = 0;
  // Blocks until an op is available; null once Close() has been called and
  // every consumer has been told (each Pop after Close returns null once).
  virtual OprBlock* Pop() = 0;
  // An op if one is queued now, else null; never blocks.
  virtual OprBlock* TryPop() = 0;
  // Makes `consumers` waiting or later Pop calls return null.
  virtual void Close(int consumers) = 0;
};

// `spin`: how long Pop polls an empty queue before it sleeps. Within that
// window an op pushed costs no system call on either side (no futex wait
// for the worker, no wake-up for the pusher); past it the worker sleeps, so
// an idle queue costs no CPU. Polling pauses between tries and yields the
// core now and then, for a pusher that shares it.
std::unique_ptr<TaskQueue> MakeFifoQueue(std::chrono::microseconds spin = {});
std::unique_ptr<TaskQueue> MakePriorityQueue(std::chrono::microseconds spin = {});

// Calls `ready` until it returns true or `spin` has passed; true if it did.
// The polling that both queues share (see MakeFifoQueue).
template <typename Ready>
bool PollFor(std::chrono::microseconds spin, Ready&& ready);

template <typename Ready>
bool PollFor(std::chrono::microseconds spin, Ready&& ready) {
  if (spin.count() <= 0) return false;
  // Tries between clock reads and yields: a try costs a few nanoseconds, a
  // pause tens, a yield (a system call) a fraction of a microsecond.
  constexpr int kTriesPerYield = 32;
  const auto deadline = std::chrono::steady_clock::now() + spin;
  do {
    for (int i = 0; i < kTriesPerYield; ++i) {
      if (ready()) return true;
      CpuRelax();
    }
    std::this_thread::yield();
  } while (std::chrono::steady_clock::now() < deadline);
  return false;
}

}  // namespace ember::engine::internal
