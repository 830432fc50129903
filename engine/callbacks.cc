// OnStart and OnComplete: the handles an async op gets to report progress.
// Each holds a reference on the op's block, so that a late or repeated call
// is detected instead of touching freed memory.

#include <fmt/format.h>

#include "engine/engine.h"
#include "engine/error.h"
#include "engine/internal/dependency_engine.h"
#include "engine/internal/opr_block.h"

namespace ember::engine {

using internal::OprBlock;

OnStart::OnStart(OprBlock* block) : block_(block) { block_->Ref(); }
OnStart::OnStart(const OnStart& other) : block_(other.block_) { block_->Ref(); }
OnStart::OnStart(OnStart&& other) noexcept : block_(std::exchange(other.block_, nullptr)) {}
OnStart& OnStart::operator=(OnStart other) noexcept {
  std::swap(block_, other.block_);
  return *this;
}
OnStart::~OnStart() {
  if (block_ != nullptr) block_->Unref();
}

void OnStart::operator()() const {
  if (block_ == nullptr) throw UsageError("[OnStart] called on a moved-from callback");
  block_->engine->OnOpStart(block_);
}

OnComplete::OnComplete(OprBlock* block) : block_(block) { block_->Ref(); }
OnComplete::OnComplete(const OnComplete& other) : block_(other.block_) { block_->Ref(); }
OnComplete::OnComplete(OnComplete&& other) noexcept
    : block_(std::exchange(other.block_, nullptr)) {}
OnComplete& OnComplete::operator=(OnComplete other) noexcept {
  std::swap(block_, other.block_);
  return *this;
}
OnComplete::~OnComplete() {
  if (block_ != nullptr) block_->Unref();
}

void OnComplete::operator()(std::exception_ptr error) const {
  if (block_ == nullptr) throw UsageError("[OnComplete] called on a moved-from callback");
  if (block_->completed.exchange(true, std::memory_order_acq_rel)) {
    throw UsageError(
        fmt::format("[OnComplete] op '{}' completed twice: call it exactly once", block_->name));
  }
  block_->engine->OnOpComplete(block_, std::move(error));
}

}  // namespace ember::engine
