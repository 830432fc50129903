#include "engine/internal/opr_block.h"

namespace ember::engine::internal {

// Members are initialized in declaration order, so `fn` and `name` refer to
// own_fn_ and own_name_ before those are constructed; they are only read
// after construction.
OprBlock::OprBlock(DependencyEngine* engine, AsyncFn fn, VarLinks vars, const OpAttrs& attrs)
    : engine(engine),
      shared_op(nullptr),
      fn(own_fn_),
      name(own_name_),
      prop(attrs.prop),
      ctx(attrs.ctx),
      priority(attrs.priority),
      links(std::move(vars)),
      own_fn_(std::move(fn)),
      own_name_(attrs.name) {}

OprBlock::OprBlock(DependencyEngine* engine, Operator* op, Context ctx, int priority)
    : engine(engine),
      shared_op(op),
      fn(op->fn()),
      name(op->name()),
      prop(op->prop()),
      ctx(ctx),
      priority(priority),
      links(op->vars()) {}

OprBlock::~OprBlock() {
  if (shared_op != nullptr) shared_op->Unref();
}

// Several vars may grant (and hand over errors) concurrently; the first error
// wins the flag and is the one written. Readers look only after the wait
// count reached zero, which orders them after every writer.
void OprBlock::InheritError(const std::exception_ptr& error) {
  if (!has_error_.exchange(true, std::memory_order_relaxed)) inherited_error_ = error;
}

}  // namespace ember::engine::internal
