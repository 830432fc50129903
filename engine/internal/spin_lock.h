#pragma once

// SpinLock: a one-word lock for the engine's per-var state.
//
// Why not Mutex: a var is touched by every op that names it, on the pusher's
// core and then on a worker's; its whole state must fit one cache line so
// that each touch moves one line. std::mutex alone is 40 bytes. Critical
// sections here are a few pointer updates and never block or allocate, so
// spinning (then yielding, for oversubscribed machines) beats sleeping. It is
// built on std::atomic, which ThreadSanitizer understands.
//
// Thread safety: thread-safe.

#include <atomic>
#include <thread>

#include <absl/base/thread_annotations.h>

namespace ember::engine::internal {

class ABSL_LOCKABLE SpinLock {
 public:
  SpinLock() = default;
  SpinLock(const SpinLock&) = delete;
  SpinLock& operator=(const SpinLock&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    for (int spins = 0; locked_.exchange(true, std::memory_order_acquire); ++spins) {
      // Wait on a plain load, so waiters do not steal the line from the holder.
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins > kSpinsBeforeYield) std::this_thread::yield();
      }
    }
  }
  void Unlock() ABSL_UNLOCK_FUNCTION() { locked_.store(false, std::memory_order_release); }

 private:
  static constexpr int kSpinsBeforeYield = 64;
  std::atomic<bool> locked_{false};
};

class ABSL_SCOPED_LOCKABLE SpinLockHolder {
 public:
  explicit SpinLockHolder(SpinLock* lock) ABSL_EXCLUSIVE_LOCK_FUNCTION(lock) : lock_(lock) {
    lock_->Lock();
  }
  ~SpinLockHolder() ABSL_UNLOCK_FUNCTION() { lock_->Unlock(); }
  SpinLockHolder(const SpinLockHolder&) = delete;
  SpinLockHolder& operator=(const SpinLockHolder&) = delete;

 private:
  SpinLock* const lock_;
};

}  // namespace ember::engine::internal
