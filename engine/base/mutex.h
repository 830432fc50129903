#pragma once

// Mutex, MutexLock, CondVar and Notification: std::mutex and
// std::condition_variable with Clang thread-safety annotations, for every
// layer of Ember (this is part of the base of engine/, which the layers
// above use through its public headers).
//
// Why not absl::Mutex: Debian's Abseil is built without ThreadSanitizer, so
// TSan cannot see absl::Mutex's happens-before edges and reports every datum
// it guards as a race (checked: two threads incrementing under an
// absl::MutexLock are flagged). std::mutex goes through pthread, which TSan
// intercepts, so our TSan build checks real races only. The annotations give
// the same -Wthread-safety checking as Abseil's.
//
// Thread safety: a Mutex is thread-safe by definition.

#include <condition_variable>
#include <mutex>

#include <absl/base/thread_annotations.h>

namespace ember {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

class CondVar {
 public:
  // Atomically releases `mu`, waits for a signal, and reacquires `mu`.
  // May wake spuriously: callers wait in a loop on their condition.
  void Wait(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

// Notification: a one-shot event (absl::Notification's contract). Notify()
// once; WaitForNotification() returns after it. What the notifier wrote
// before Notify() is visible to the waiter after its wait.
class Notification {
 public:
  void Notify() {
    MutexLock lock(&mu_);
    notified_ = true;
    cv_.SignalAll();
  }
  void WaitForNotification() {
    MutexLock lock(&mu_);
    while (!notified_) cv_.Wait(&mu_);
  }
  [[nodiscard]] bool HasBeenNotified() {
    MutexLock lock(&mu_);
    return notified_;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  bool notified_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ember
