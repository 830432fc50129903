#pragma once

// Var: the engine's state for one var: a FIFO of the accesses that wait for
// it, the accesses that currently hold it, and the threads waiting for its
// writes (WaitForVar).
//
// Invariants, all under mu_:
//  1. Holders are either one write (writing_) or any number of reads
//     (running_reads_ > 0), never both.
//  2. The queue (access_queue.h) holds accesses in push order; its head
//     waits only for the holders, every later entry also for the entries
//     before it. A read is granted on arrival only when nothing is queued
//     and nothing writes.
//  3. An access is granted at most once; granting decrements its op's wait
//     count and hands the op the var's error if it is still live (see
//     op_error.h).
//  4. pending_writes_ counts the writes queued or holding the var, so the
//     writes pushed so far number version_ + pending_writes_; a waiter
//     registered then is woken once version_ reaches that number, that is
//     by exactly the writes pushed before it, never by reads or later writes.
//
// Pushes are serialized by the engine (so two ops sharing vars are queued in
// the same order on all of them) and, like completions, lock one var at a
// time. While holding mu_ the engine may take the var's SyncObject lock (to
// read a fence for a waiter), never the other way round.
//
// Thread safety: methods named *Locked require mu(); the others take it.

#include <atomic>
#include <cstdint>

#include <absl/functional/function_ref.h>

#include "engine/base/mutex.h"
#include "engine/base/spin_lock.h"
#include "engine/internal/access.h"
#include "engine/internal/access_queue.h"
#include "engine/internal/gpu_fence.h"
#include "engine/internal/op_error.h"

namespace ember::engine::internal {

struct OprBlock;

// One op's access to one var.
struct VarLink {
  OprBlock* block = nullptr;
  class Var* var = nullptr;
  uint32_t generation = 0;  // of the handle the pusher named, rechecked under the lock
  Access mode = Access::kRead;
};

// A thread blocked in WaitForVar, on its own stack until woken.
struct VarWaiter {
  uint64_t target_version = 0;  // woken once this many writes have finished
                                // (or, not registered, the version it found)
  VarWaiter* next = nullptr;
  ErrorRef error;  // what the target write left on the var
  GpuFence fence;  // that write's GPU work, filled in by the waker
  Notification woken;
};

// Ops made ready by a var transition, to be dispatched once no lock is held.
class ReadyList;

// Waiters woken by a write, to be notified once no lock is held. Notifying
// one may end its WaitForVar, so the list reads `next` before each Notify.
class WokenList {
 public:
  void Add(VarWaiter* waiter) {
    waiter->next = head_;
    head_ = waiter;
  }
  void NotifyAll();

 private:
  VarWaiter* head_ = nullptr;
};

// One cache line: see spin_lock.h for why that matters.
class alignas(64) Var {
 public:
  Var() = default;
  Var(const Var&) = delete;
  Var& operator=(const Var&) = delete;

  SpinLock& mu() ABSL_LOCK_RETURNED(mu_) { return mu_; }

  // Queues `link` behind the var's earlier accesses, or grants it now.
  // REQUIRES: a queue chunk set aside on this thread (AccessQueue::Reserve).
  void AppendLocked(const VarLink& link, ReadyList* ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // A granted read of the var has finished.
  void CompleteRead(ReadyList* ready);
  // A granted write has finished, leaving `error` (null on success) on the
  // var and bumping its version. Waiters it satisfies are passed to
  // `on_wake` (under the lock, before any later access is granted) and then
  // added to `woken`.
  void CompleteWrite(ErrorRef error, ReadyList* ready, WokenList* woken,
                     absl::FunctionRef<void(VarWaiter&)> on_wake);

  // WaitForVar: when a write pushed before now is still pending, registers
  // `waiter` to be woken by the last of them and returns true; otherwise
  // fills waiter->error with the var's error and returns false.
  bool AddWaiterLocked(VarWaiter* waiter) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The var's error (null when none or already reported).
  ErrorRef error();
  // A deferred check of the op whose write gave the var `version` failed:
  // the var carries `error` if it is still at that write (generation and
  // version), else nothing changes. Returns whether it took it.
  bool SetErrorAt(uint32_t generation, uint64_t version, const ErrorRef& error);
  // The var's live error if it is still at `generation` and `version`.
  ErrorRef ErrorAt(uint32_t generation, uint64_t version);

  [[nodiscard]] uint64_t version() const { return version_.load(std::memory_order_acquire); }

  // Handle generation: bumped when the var is deleted, so stale handles fail.
  [[nodiscard]] uint32_t generation() const { return generation_.load(std::memory_order_acquire); }
  void BumpGenerationLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Resets a deleted var's state for reuse by a new handle.
  void ResetForReuse();

  // The var's slot in its VarTable; set once when the slot is made.
  [[nodiscard]] uint32_t slot() const { return slot_; }
  void set_slot(uint32_t slot) { slot_ = slot; }

 private:
  void GrantLocked(OprBlock* block, bool writes, ReadyList* ready)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void GrantFromQueueLocked(ReadyList* ready, AccessQueue::Spent* spent)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  SpinLock mu_;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  int running_reads_ ABSL_GUARDED_BY(mu_) = 0;
  AccessQueue queue_ ABSL_GUARDED_BY(mu_);
  ErrorRef error_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> version_{0};
  std::atomic<uint32_t> generation_{1};
  uint32_t slot_ = 0;
  uint32_t pending_writes_ ABSL_GUARDED_BY(mu_) = 0;
  VarWaiter* waiters_ ABSL_GUARDED_BY(mu_) = nullptr;  // unordered
};

}  // namespace ember::engine::internal
