#pragma once

// SpinLock: a one-word lock for state touched on every op (the engine's
// vars, its push lock, a stream's event pool).
//
// Why not Mutex: a var is touched by every op that names it, on the pusher's
// core and then on a worker's; its whole state must fit one cache line so
// that each touch moves one line. std::mutex alone is 40 bytes. Critical
// sections here are a few pointer updates and never block or allocate, so
// spinning (then yielding, for oversubscribed machines) beats sleeping. It is
// built on std::atomic, which ThreadSanitizer understands.
//
// Rule for holders: never block (no system call, no CUDA call that waits,
// no other lock but a SpinLock taken in a fixed order) while holding one.
//
// Thread safety: thread-safe.

#include <atomic>
#include <thread>

#include <absl/base/thread_annotations.h>

namespace ember {

// A hint to the core that the caller is spinning: it frees the core's
// resources for a sibling hardware thread and eases the memory traffic of
// the spin.
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

class ABSL_LOCKABLE SpinLock {
 public:
  SpinLock() = default;
  SpinLock(const SpinLock&) = delete;
  SpinLock& operator=(const SpinLock&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    for (int spins = 0; locked_.exchange(true, std::memory_order_acquire);) {
      // Wait on a plain load, so waiters do not steal the line from the holder.
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins < kSpinsBeforeYield) {
          CpuRelax();
        } else {
          std::this_thread::yield();
        }
      }
    }
  }
  void Unlock() ABSL_UNLOCK_FUNCTION() { locked_.store(false, std::memory_order_release); }

 private:
  // Holders keep the lock for well under a microsecond, so a waiter spins
  // (pausing, which frees the core's resources for its sibling thread)
  // for longer than that before it yields: a yield is a system call, and
  // yielding after a few dozen spins once cost a third of a pushing
  // thread's time on the random DAG. It still yields in the end, for
  // oversubscribed machines where the holder may have been preempted.
  static constexpr int kSpinsBeforeYield = 256;
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

}  // namespace ember
