#pragma once

// Operator and OprBlock: an op as described, and one push of it in flight.
//
// An Operator (NewOperator) is a description pushed many times: function,
// normalized vars (one per var, a write wins) and attributes.
// A one-shot push (PushAsync, PushSync) has no Operator: its block holds the
// function itself (a PushSync's as it came, not wrapped into an async one).
//
// An OprBlock lives from push to completion, in one allocation with its
// VarLinks right behind it, from the BlockPool: a push allocates nothing
// else in the steady state. Its wait count starts at the number of vars
// plus one; each var grant takes one, the pusher takes the last once all
// vars are queued, and whoever takes it to zero dispatches the op. Its refs
// count the engine's own reference plus every live OnStart and OnComplete,
// so a callback called late (or twice) never touches freed memory.
//
// Fields by owner (each field's comment repeats it):
//  - the constant part, the function, `seq`, `done` and the links: the
//    pushing thread, before the op is queued; constant after;
//  - `wait`: decremented by whoever grants a var (atomic, acq_rel);
//  - `refs`, `completed`: atomic, any thread holding a reference;
//  - the inherited error: written by granting threads before the last
//    `wait` decrement, read after it (see InheritError);
//  - `gpu` and the profiling fields: the thread running the op (`gpu.stream`
//    may be set before, by the worker that lends it a stream).
//
// Memory ordering: grants decrement `wait` with acq_rel, so the thread that
// dispatches the op sees every error handed to it by InheritError.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <absl/container/inlined_vector.h>

#include "engine/engine.h"
#include "engine/internal/access.h"
#include "engine/internal/gpu_backend.h"
#include "engine/internal/gpu_fence.h"
#include "engine/internal/op_error.h"
#include "engine/internal/var.h"

namespace ember::engine::internal {

class DependencyEngine;

// One var of a push, normalized: what a VarLink is made from.
struct VarAccess {
  Var* var = nullptr;
  uint32_t generation = 0;  // of the handle, rechecked under the var's lock
  Access mode = Access::kRead;
};
// A push's normalized vars: one per var. Inline room for every op short of
// huge ones.
using VarAccesses = absl::InlinedVector<VarAccess, 64>;

class Operator {
 public:
  Operator(AsyncFn fn, std::span<const VarAccess> vars, const OpAttrs& attrs)
      : fn_(std::move(fn)), vars_(vars.begin(), vars.end()), prop_(attrs.prop), name_(attrs.name) {}

  const AsyncFn& fn() const { return fn_; }
  std::span<const VarAccess> vars() const { return vars_; }
  FnProperty prop() const { return prop_; }
  const std::string& name() const { return name_; }

  // Shared ownership between the user's handle and in-flight pushes.
  void Ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void Unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

 private:
  AsyncFn fn_;
  std::vector<VarAccess> vars_;
  FnProperty prop_;
  std::string name_;
  std::atomic<int> refs_{1};
};

struct alignas(alignof(VarLink)) OprBlock {
 private:
  // First, so that it exists before `name`, which may view it.
  std::string own_name_;

 public:
  // A one-shot push of `vars`; its function is set with SetFn before the
  // push. A push of a shared operator, which it references until done.
  static OprBlock* New(DependencyEngine* engine, std::span<const VarAccess> vars,
                       const OpAttrs& attrs);
  static OprBlock* New(DependencyEngine* engine, Operator* op, Context ctx, int priority);
  // Frees the block.
  void Destroy();
  // The last reference is gone: frees the block, after failing it if it
  // never completed (see opr_block.cc).
  void Release();
  // For owners outside the engine (tests): destroys on scope exit.
  struct Deleter {
    void operator()(OprBlock* block) const { block->Destroy(); }
  };

  OprBlock(const OprBlock&) = delete;
  OprBlock& operator=(const OprBlock&) = delete;

  void SetFn(AsyncFn fn) { own_async_ = std::move(fn); }
  void SetFn(SyncFn fn) { own_sync_ = std::move(fn); }
  // A sync op (PushSync) runs its SyncFn between the engine's own start and
  // completion, without OnStart/OnComplete objects.
  [[nodiscard]] bool is_sync() const { return static_cast<bool>(own_sync_); }
  [[nodiscard]] const SyncFn& sync_fn() const { return own_sync_; }
  [[nodiscard]] const AsyncFn& async_fn() const {
    return shared_op != nullptr ? shared_op->fn() : own_async_;
  }

  [[nodiscard]] std::span<VarLink> links() {
    return {reinterpret_cast<VarLink*>(this + 1), num_links};
  }

  // Hands the op an error found on one of its vars; the first one sticks.
  void InheritError(const ErrorRef& error);
  [[nodiscard]] const ErrorRef& inherited_error() const { return inherited_error_; }

  // Takes one dependency; true when it was the last.
  bool DecrementWait() { return wait.fetch_sub(1, std::memory_order_acq_rel) == 1; }

  void Ref() { refs.fetch_add(1, std::memory_order_relaxed); }
  void Unref() {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) Release();
  }

  // The name as a C string (NVTX): every source of `name` is a
  // std::string's whole text, so a terminator follows it.
  [[nodiscard]] const char* c_name() const { return name.empty() ? "" : name.data(); }

  // The view of this op that the GPU backend gets.
  GpuOp gpu_op() { return GpuOp{name, ctx.device_id, links(), gpu}; }

  // Borrowed: for the call of the op's function only, during which the
  // engine holds the block (DependencyEngine::Execute).
  OnStart MakeOnStart() { return OnStart(this, OnStart::Borrowed{}); }
  OnComplete MakeOnComplete() { return OnComplete(this, OnComplete::Borrowed{}); }

  DependencyEngine* const engine;
  Operator* const shared_op;  // null for one-shot pushes
  // The interned name (op_names.h), shared_op->name(), or own_name_ when
  // the intern table is full; always followed by a '\0' (see c_name()).
  const std::string_view name;
  const FnProperty prop;
  const Context ctx;
  const int priority;
  const uint32_t num_links;
  uint64_t seq = 0;  // push order, for FIFO among equal priorities
  std::atomic<int> wait{0};
  std::atomic<int> refs{1};
  std::atomic<bool> completed{false};
  // The deleted var's slot is recycled when this op completes.
  bool deletes_var = false;
  // Set by a synchronous (Naive) push that waits for this op.
  Notification* done = nullptr;
  // GPU ops: the backend's state (see GpuOpState for who writes what).
  GpuOpState gpu;
  // Profiling, by the thread running the op: its row and when it started.
  uint64_t profile_row = 0;
  int64_t profile_begin_ns = 0;

 private:
  OprBlock(DependencyEngine* engine, Operator* op, std::string_view own_name, FnProperty prop,
           Context ctx, int priority, std::span<const VarAccess> vars);
  ~OprBlock();
  static std::size_t BytesFor(std::size_t links);

  AsyncFn own_async_;
  SyncFn own_sync_;
  std::atomic<bool> has_error_{false};
  ErrorRef inherited_error_;
};

// Ops made ready while locks were held; dispatched after they are released.
class ReadyList {
 public:
  void Add(OprBlock* block) { blocks_.push_back(block); }
  [[nodiscard]] bool empty() const { return blocks_.empty(); }
  auto begin() const { return blocks_.begin(); }
  auto end() const { return blocks_.end(); }

 private:
  absl::InlinedVector<OprBlock*, 8> blocks_;
};

}  // namespace ember::engine::internal
