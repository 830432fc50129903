#pragma once

// Operator and OprBlock: an op as described, and one push of it in flight.
//
// An Operator (NewOperator) is a description pushed many times: function,
// normalized vars (unique, sorted by address, a write wins) and attributes.
// A one-shot push (PushAsync, PushSync) has no Operator: its block holds the
// function and vars itself, so that a push costs a single allocation.
//
// An OprBlock lives from push to completion. Its wait count starts at the
// number of vars plus one; each var grant takes one, the pusher takes the
// last once all vars are queued, and whoever takes it to zero dispatches the
// op. Its refs count the engine's own reference plus every live OnStart and
// OnComplete, so a callback called late (or twice) never touches freed memory.
//
// Memory ordering: grants decrement `wait` with acq_rel, so the thread that
// dispatches the op sees every error handed to it by InheritError.

#include <atomic>
#include <cstdint>
#include <exception>
#include <string>

#include <absl/container/inlined_vector.h>

#include "engine/engine.h"
#include "engine/internal/access.h"
#include "engine/internal/block_pool.h"
#include "engine/internal/gpu_backend.h"
#include "engine/internal/var.h"

namespace ember::engine::internal {

class DependencyEngine;
class Notification;

// A push's vars, normalized: one link per var, sorted by var address (the
// order two-phase locking needs). Inline room for typical ops.
using VarLinks = absl::InlinedVector<VarLink, 16>;

class Operator {
 public:
  Operator(AsyncFn fn, VarLinks vars, const OpAttrs& attrs)
      : fn_(std::move(fn)), vars_(std::move(vars)), prop_(attrs.prop), name_(attrs.name) {}

  const AsyncFn& fn() const { return fn_; }
  const VarLinks& vars() const { return vars_; }
  FnProperty prop() const { return prop_; }
  const std::string& name() const { return name_; }

  // Shared ownership between the user's handle and in-flight pushes.
  void Ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void Unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
  // Set by DeleteOperator; a Push of a deleted operator is refused.
  std::atomic<bool> deleted{false};

 private:
  AsyncFn fn_;
  VarLinks vars_;
  FnProperty prop_;
  std::string name_;
  std::atomic<int> refs_{1};
};

struct OprBlock {
  // A one-shot push: the block owns the function and the (normalized) vars.
  OprBlock(DependencyEngine* engine, AsyncFn fn, VarLinks vars, const OpAttrs& attrs);
  // A push of a shared operator, which the block references until done.
  OprBlock(DependencyEngine* engine, Operator* op, Context ctx, int priority);
  ~OprBlock();
  OprBlock(const OprBlock&) = delete;
  OprBlock& operator=(const OprBlock&) = delete;

  // Blocks are freed on other threads than the one that made them; see
  // block_pool.h for why their memory is recycled.
  static void* operator new(std::size_t size) { return BlockPool::Allocate(size); }
  static void operator delete(void* memory) { BlockPool::Free(memory); }

  // Hands the op an error found on one of its vars; the first one sticks.
  void InheritError(const std::exception_ptr& error);
  [[nodiscard]] const std::exception_ptr& inherited_error() const { return inherited_error_; }

  // Takes one dependency; true when it was the last.
  bool DecrementWait() { return wait.fetch_sub(1, std::memory_order_acq_rel) == 1; }

  void Ref() { refs.fetch_add(1, std::memory_order_relaxed); }
  void Unref() {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  OnStart MakeOnStart() { return OnStart(this); }
  OnComplete MakeOnComplete() { return OnComplete(this); }

  DependencyEngine* const engine;
  Operator* const shared_op;  // null for one-shot pushes
  const AsyncFn& fn;          // own_fn_ or shared_op->fn()
  const std::string& name;    // own_name_ or shared_op->name()
  const FnProperty prop;
  const Context ctx;
  const int priority;
  uint64_t seq = 0;  // push order, for FIFO among equal priorities
  VarLinks links;
  std::atomic<int> wait{0};
  std::atomic<int> refs{1};
  std::atomic<bool> completed{false};
  // The deleted var's slot is recycled when this op completes.
  bool deletes_var = false;
  // Set by a synchronous (Naive) push that waits for this op.
  Notification* done = nullptr;
  // GPU ops: the stream of the thread that runs the op (set when it runs).
  ThreadStream stream;
  // Profiling: the row of the thread that ran the op and when it started.
  uint64_t profile_row = 0;
  int64_t profile_begin_ns = 0;
  void* profile_gpu_begin = nullptr;  // a timing cudaEvent_t, GPU ops only

 private:
  AsyncFn own_fn_;
  std::string own_name_;
  std::atomic<bool> has_error_{false};
  std::exception_ptr inherited_error_;
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
