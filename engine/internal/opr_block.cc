#include "engine/internal/opr_block.h"

#include <new>

#include <fmt/format.h>

#include "engine/error.h"
#include "engine/internal/block_pool.h"
#include "engine/internal/dependency_engine.h"
#include "engine/internal/op_names.h"

namespace ember::engine::internal {

std::size_t OprBlock::BytesFor(std::size_t links) {
  return sizeof(OprBlock) + links * sizeof(VarLink);
}

OprBlock* OprBlock::New(DependencyEngine* engine, std::span<const VarAccess> vars,
                        const OpAttrs& attrs) {
  void* memory = BlockPool::Allocate(BytesFor(vars.size()));
  return new (memory)
      OprBlock(engine, nullptr, attrs.name, attrs.prop, attrs.ctx, attrs.priority, vars);
}

OprBlock* OprBlock::New(DependencyEngine* engine, Operator* op, Context ctx, int priority) {
  void* memory = BlockPool::Allocate(BytesFor(op->vars().size()));
  return new (memory) OprBlock(engine, op, {}, op->prop(), ctx, priority, op->vars());
}

void OprBlock::Destroy() {
  const std::size_t bytes = BytesFor(num_links);
  this->~OprBlock();
  BlockPool::Free(this, bytes);
}

// Every path that runs an op completes it while holding a reference, so an
// op not completed when its last reference goes is an async op that
// returned without calling on_complete and kept no copy of it: nobody can
// complete it any more, and its vars would stay held, every wait on them
// hanging. It fails instead, with the reason, and its waiters see that.
void OprBlock::Release() {
  // No other reference exists, so nothing races these.
  if (completed.load(std::memory_order_acquire)) {
    Destroy();
    return;
  }
  completed.store(true, std::memory_order_relaxed);
  refs.store(1, std::memory_order_relaxed);  // held through the completion
  engine->OnOpComplete(
      this, std::make_exception_ptr(UsageError(fmt::format(
                "[OnComplete] async op '{}' returned without calling on_complete and kept no "
                "copy of it: it could never complete",
                name))));
  Unref();
}

namespace {

// A one-shot push's name: interned, or copied into `own` once the intern
// table is full.
std::string_view NameOf(std::string_view name, std::string* own) {
  bool interned = false;
  const std::string_view stable = InternOpName(name, &interned);
  if (interned) return stable;
  *own = name;
  return *own;
}

}  // namespace

// own_name_ is declared (so constructed) before `name`, which may view it.
OprBlock::OprBlock(DependencyEngine* engine, Operator* op, std::string_view own_name,
                   FnProperty prop, Context ctx, int priority, std::span<const VarAccess> vars)
    : engine(engine),
      shared_op(op),
      name(op != nullptr ? std::string_view(op->name()) : NameOf(own_name, &own_name_)),
      prop(prop),
      ctx(ctx),
      priority(priority),
      num_links(static_cast<uint32_t>(vars.size())) {
  VarLink* link = links().data();
  for (const VarAccess& access : vars) {
    new (link++) VarLink{this, access.var, access.generation, access.mode};
  }
}

OprBlock::~OprBlock() {
  if (shared_op != nullptr) shared_op->Unref();
}

// Several vars may grant (and hand over errors) concurrently; the first error
// wins the flag and is the one written. Readers look only after the wait
// count reached zero, which orders them after every writer.
void OprBlock::InheritError(const ErrorRef& error) {
  if (!has_error_.exchange(true, std::memory_order_relaxed)) inherited_error_ = error;
}

}  // namespace ember::engine::internal
