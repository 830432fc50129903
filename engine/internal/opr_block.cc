#include "engine/internal/opr_block.h"

namespace ember::engine::internal {

OprBlock::OprBlock(DependencyEngine* engine, Operator* op, Context ctx, int priority)
    : engine(engine), op(op), ctx(ctx), priority(priority) {}

OprBlock::~OprBlock() { op->Unref(); }

// Several vars may grant (and hand over errors) concurrently; the first error
// wins the flag and is the one written. Readers look only after the wait
// count reached zero, which orders them after every writer.
void OprBlock::InheritError(const std::exception_ptr& error) {
  if (!has_error_.exchange(true, std::memory_order_relaxed)) inherited_error_ = error;
}

}  // namespace ember::engine::internal
