// OnStart and OnComplete: the handles an async op gets to report progress.
// Each holds a reference on the op's block (BlockRef), so that a late or
// repeated call is detected instead of touching freed memory.

#include <fmt/format.h>

#include "engine/engine.h"
#include "engine/error.h"
#include "engine/internal/dependency_engine.h"
#include "engine/internal/opr_block.h"

namespace ember::engine {
namespace internal {

BlockRef::BlockRef(OprBlock* block) : block_(block) { block_->Ref(); }
BlockRef::BlockRef(const BlockRef& other) : block_(other.block_) {
  if (block_ != nullptr) block_->Ref();
}
// A borrowed reference is not handed on: the mover counts a new one and the
// borrowed one stays as it was (it was never the mover's to end).
BlockRef::BlockRef(BlockRef&& other) noexcept
    : block_(other.counted_ ? std::exchange(other.block_, nullptr) : other.block_) {
  if (!other.counted_ && block_ != nullptr) block_->Ref();
}
BlockRef& BlockRef::operator=(BlockRef other) noexcept {
  std::swap(block_, other.block_);
  std::swap(counted_, other.counted_);
  return *this;
}
BlockRef::~BlockRef() {
  if (counted_ && block_ != nullptr) block_->Unref();
}

OprBlock* BlockRef::block(const char* who) const {
  if (block_ == nullptr) throw UsageError(fmt::format("[{}] called on a moved-from callback", who));
  return block_;
}

}  // namespace internal

void OnStart::operator()() const {
  internal::OprBlock* op = block("OnStart");
  op->engine->OnOpStart(op);
}

namespace {

// The op behind `callback`, after checking it is completed only once.
internal::OprBlock* CompleteOnce(internal::OprBlock* op) {
  if (op->completed.exchange(true, std::memory_order_acq_rel)) {
    throw UsageError(
        fmt::format("[OnComplete] op '{}' completed twice: call it exactly once", op->name));
  }
  return op;
}

}  // namespace

void OnComplete::operator()(std::exception_ptr error) const {
  internal::OprBlock* op = CompleteOnce(block("OnComplete"));
  op->engine->OnOpComplete(op, std::move(error));
}

void OnComplete::WithCheck(DeferredCheck check) const {
  internal::OprBlock* op = CompleteOnce(block("OnComplete::WithCheck"));
  if (!check) {  // the op fails: an op never completed would hang its waiters
    op->engine->OnOpComplete(op, std::make_exception_ptr(InvalidArgument(fmt::format(
                                     "[OnComplete::WithCheck] op '{}': empty check", op->name))));
    return;
  }
  op->engine->OnOpComplete(op, nullptr, std::move(check));
}

}  // namespace ember::engine
