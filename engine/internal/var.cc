#include "engine/internal/var.h"

#include "engine/internal/opr_block.h"

namespace ember::engine::internal {

void Var::GrantLocked(VarLink* link, ReadyList* ready) {
  if (Writes(link->mode)) {
    writing_ = true;
  } else {
    ++running_reads_;
  }
  if (error_) link->block->InheritError(error_);
  if (link->block->DecrementWait()) ready->Add(link->block);
}

void Var::AppendLocked(VarLink* link, ReadyList* ready) {
  const bool idle = head_ == nullptr && !writing_;
  if (idle && (!Writes(link->mode) || running_reads_ == 0)) {
    GrantLocked(link, ready);
    return;
  }
  link->next = nullptr;
  if (tail_ == nullptr) {
    head_ = tail_ = link;
  } else {
    tail_->next = link;
    tail_ = link;
  }
}

// Grants the queue's head: one write once nothing holds the var, or every
// read up to the next write.
void Var::GrantFromQueueLocked(ReadyList* ready) {
  while (head_ != nullptr && !writing_) {
    VarLink* link = head_;
    if (Writes(link->mode) && running_reads_ > 0) return;
    head_ = link->next;
    if (head_ == nullptr) tail_ = nullptr;
    GrantLocked(link, ready);
  }
}

void Var::CompleteRead(ReadyList* ready) {
  SpinLockHolder lock(&mu_);
  --running_reads_;
  if (running_reads_ == 0) GrantFromQueueLocked(ready);
}

void Var::CompleteWrite(std::exception_ptr error, ReadyList* ready) {
  SpinLockHolder lock(&mu_);
  writing_ = false;
  error_ = std::move(error);
  version_.fetch_add(1, std::memory_order_release);
  GrantFromQueueLocked(ready);
}

void Var::ClearErrorIf(const std::exception_ptr& seen) {
  SpinLockHolder lock(&mu_);
  if (error_ == seen) error_ = nullptr;
}

std::exception_ptr Var::PeekError() {
  SpinLockHolder lock(&mu_);
  return error_;
}

std::exception_ptr Var::TakeError() {
  SpinLockHolder lock(&mu_);
  return std::exchange(error_, nullptr);
}

void Var::BumpGenerationLocked() { generation_.fetch_add(1, std::memory_order_release); }

void Var::ResetForReuse() {
  SpinLockHolder lock(&mu_);
  head_ = tail_ = nullptr;
  running_reads_ = 0;
  writing_ = false;
  error_ = nullptr;
  version_.store(0, std::memory_order_release);
}

}  // namespace ember::engine::internal
static_assert(sizeof(ember::engine::internal::Var) == 64, "a var must fill one cache line");
