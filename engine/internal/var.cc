#include "engine/internal/var.h"

#include "engine/internal/opr_block.h"

namespace ember::engine::internal {

void WokenList::NotifyAll() {
  while (head_ != nullptr) {
    VarWaiter* waiter = head_;
    head_ = waiter->next;
    waiter->woken.Notify();  // may end the waiter's frame: nothing after this
  }
}

void Var::GrantLocked(OprBlock* block, bool writes, ReadyList* ready) {
  if (writes) {
    writing_ = true;
  } else {
    ++running_reads_;
  }
  if (error_.live()) block->InheritError(error_);
  if (block->DecrementWait()) ready->Add(block);
}

void Var::AppendLocked(const VarLink& link, ReadyList* ready) {
  const bool writes = Writes(link.mode);
  if (writes) ++pending_writes_;
  const bool idle = queue_.empty() && !writing_;
  if (idle && (!writes || running_reads_ == 0)) {
    GrantLocked(link.block, writes, ready);
    return;
  }
  queue_.Push(link.block, link.mode);
}

// Grants the queue's head: one write once nothing holds the var, or every
// read up to the next write.
void Var::GrantFromQueueLocked(ReadyList* ready, AccessQueue::Spent* spent) {
  if (queue_.empty() || writing_) return;
  queue_.PrefetchFront();
  while (!queue_.empty() && !writing_) {
    const AccessQueue::Entry next = queue_.front();
    if (next.writes && running_reads_ > 0) return;
    queue_.PopFront(spent);
    GrantLocked(next.block, next.writes, ready);
  }
}

// (Here and below, `spent` is declared first so that its chunks are freed
// after the lock is released.)
void Var::CompleteRead(ReadyList* ready) {
  AccessQueue::Spent spent;
  SpinLockHolder lock(&mu_);
  --running_reads_;
  if (running_reads_ == 0) GrantFromQueueLocked(ready, &spent);
}

void Var::CompleteWrite(ErrorRef error, ReadyList* ready, WokenList* woken,
                        absl::FunctionRef<void(VarWaiter&)> on_wake) {
  AccessQueue::Spent spent;
  SpinLockHolder lock(&mu_);
  writing_ = false;
  --pending_writes_;
  error_ = std::move(error);
  const uint64_t version = version_.fetch_add(1, std::memory_order_release) + 1;
  for (VarWaiter** at = &waiters_; *at != nullptr;) {
    VarWaiter* waiter = *at;
    if (waiter->target_version > version) {
      at = &waiter->next;
      continue;
    }
    *at = waiter->next;
    waiter->error = error_;
    on_wake(*waiter);
    woken->Add(waiter);
  }
  GrantFromQueueLocked(ready, &spent);
}

bool Var::AddWaiterLocked(VarWaiter* waiter) {
  if (pending_writes_ == 0) {
    waiter->error = error_.live() ? error_ : ErrorRef();
    waiter->target_version = version_.load(std::memory_order_relaxed);
    return false;
  }
  waiter->target_version = version_.load(std::memory_order_relaxed) + pending_writes_;
  waiter->next = waiters_;
  waiters_ = waiter;
  return true;
}

ErrorRef Var::error() {
  SpinLockHolder lock(&mu_);
  return error_.live() ? error_ : ErrorRef();
}

bool Var::SetErrorAt(uint32_t generation, uint64_t version, const ErrorRef& error) {
  SpinLockHolder lock(&mu_);
  if (generation_.load(std::memory_order_relaxed) != generation ||
      version_.load(std::memory_order_relaxed) != version) {
    return false;
  }
  error_ = error;
  return true;
}

ErrorRef Var::ErrorAt(uint32_t generation, uint64_t version) {
  SpinLockHolder lock(&mu_);
  if (generation_.load(std::memory_order_relaxed) != generation ||
      version_.load(std::memory_order_relaxed) != version || !error_.live()) {
    return {};
  }
  return error_;
}

void Var::BumpGenerationLocked() { generation_.fetch_add(1, std::memory_order_release); }

void Var::ResetForReuse() {
  AccessQueue::Spent spent;
  SpinLockHolder lock(&mu_);
  queue_.Clear(&spent);
  running_reads_ = 0;
  writing_ = false;
  error_ = ErrorRef();
  pending_writes_ = 0;
  waiters_ = nullptr;  // none can be left: a deleted var's handle is stale
  version_.store(0, std::memory_order_release);
}

}  // namespace ember::engine::internal
static_assert(sizeof(ember::engine::internal::Var) == 64, "a var must fill one cache line");
