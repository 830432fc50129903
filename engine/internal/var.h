#pragma once

// Var: the engine's state for one var: a FIFO of the accesses that wait for
// it, and the accesses that currently hold it.
//
// Invariants, all under mu_:
//  1. Holders are either one write (writing_) or any number of reads
//     (running_reads_ > 0), never both.
//  2. The queue holds accesses in push order; its head waits only for the
//     holders, every later entry also for the entries before it. A read is
//     granted on arrival only when nothing is queued and nothing writes.
//  3. An access is granted at most once; granting decrements its op's wait
//     count and hands the op the var's current error (see OprBlock).
//
// Pushes lock all the vars of one op at once, in address order (two-phase
// locking), so that two ops sharing vars are queued in the same order on all
// of them; completions lock one var at a time. Hence no lock-order cycle.
//
// Thread safety: methods named *Locked require mu(); the others take it.

#include <atomic>
#include <cstdint>
#include <exception>

#include "engine/internal/access.h"
#include "engine/internal/spin_lock.h"

namespace ember::engine::internal {

struct OprBlock;

// One op's access to one var, linked into the var's queue while it waits.
struct VarLink {
  OprBlock* block = nullptr;
  class Var* var = nullptr;
  VarLink* next = nullptr;
  uint32_t generation = 0;  // of the handle the pusher named, rechecked under the lock
  Access mode = Access::kRead;
};

// Ops made ready by a var transition, to be dispatched once no lock is held.
class ReadyList;

// One cache line: see spin_lock.h for why that matters.
class alignas(64) Var {
 public:
  Var() = default;
  Var(const Var&) = delete;
  Var& operator=(const Var&) = delete;

  SpinLock& mu() ABSL_LOCK_RETURNED(mu_) { return mu_; }

  // Queues `link` behind the var's earlier accesses, or grants it now.
  void AppendLocked(VarLink* link, ReadyList* ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // A granted read or write of the var has finished. A write leaves
  // `error` (null on success) on the var and bumps its version.
  void CompleteRead(ReadyList* ready);
  void CompleteWrite(std::exception_ptr error, ReadyList* ready);

  // The var's error, taken (cleared) only if it is still `seen`: a later
  // write may have left a newer error, which a later wait must report.
  void ClearErrorIf(const std::exception_ptr& seen);
  std::exception_ptr PeekError();
  std::exception_ptr TakeError();

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
  void GrantLocked(VarLink* link, ReadyList* ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void GrantFromQueueLocked(ReadyList* ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  SpinLock mu_;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  int running_reads_ ABSL_GUARDED_BY(mu_) = 0;
  VarLink* head_ ABSL_GUARDED_BY(mu_) = nullptr;
  VarLink* tail_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::exception_ptr error_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> version_{0};
  std::atomic<uint32_t> generation_{1};
  uint32_t slot_ = 0;
};

}  // namespace ember::engine::internal
