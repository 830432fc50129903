#pragma once

// Engine: a dependency engine. Ops declare the vars they read (const vars) and
// write (mutable vars); the engine runs each op as soon as every earlier op
// that conflicts with it has finished.
//
// State model. A var is an opaque handle to a versioned piece of state the
// engine knows nothing else about. Two ops conflict when they name a common
// var and at least one of them writes it; conflicting ops run in push order,
// reads between two writes may run concurrently. A var named twice, or both
// read and written by one op, is normalized to one access (a write wins).
// Each finished write bumps the var's version.
//
// Errors. An op fails when its function throws or passes an error to
// on_complete. Its mutable vars then carry that error; a later op that names
// a var carrying an error (as a read or a write, since writes are often
// read-modify-write) is skipped unless it is kNoSkip, and passes the same
// error on to its own mutable vars. An error is reported once, by the first
// wait that sees it: WaitForVar or Throw on a var that carries it, or
// WaitForAll. From then on it poisons nothing: vars that still carry it read
// as clean, and ops that would have been skipped for it run (MXNet's rule;
// a training loop that catches an error and goes on runs everything it
// pushes after). An op already running or made ready when the report
// happens may still be skipped. WaitForAll never loses an error: it reports
// every error no wait has reported yet, however the ops failed in time. The
// engine stays usable after any error.
//
// Thread safety: thread-safe. Any thread may push and wait, concurrently;
// ops may push from inside their functions, but may not wait.
//
// Memory ordering: what an op wrote before calling on_complete() happens
// before the start of every later op that conflicts with it, and before
// WaitForVar/WaitForAll return in the waiting thread.

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "engine/context.h"
#include "engine/engine_options.h"

namespace ember::engine {

namespace internal {
struct OprBlock;
}  // namespace internal

// VarHandle: names one var of one engine. Copyable; a default-constructed
// handle names no var. A handle goes stale when its var is deleted; using a
// stale handle, or one from another engine, raises InvalidArgument.
class VarHandle {
 public:
  constexpr VarHandle() = default;
  static constexpr VarHandle FromBits(uint64_t bits) { return VarHandle(bits); }
  [[nodiscard]] constexpr uint64_t bits() const { return bits_; }
  [[nodiscard]] constexpr bool is_null() const { return bits_ == 0; }
  friend constexpr bool operator==(VarHandle, VarHandle) = default;

 private:
  constexpr explicit VarHandle(uint64_t bits) : bits_(bits) {}
  uint64_t bits_ = 0;
};

// VarList: a borrowed list of vars for one push; it only needs to live until
// the push returns. Built from a braced list, a vector or a span.
class VarList {
 public:
  VarList() = default;
  VarList(std::initializer_list<VarHandle> vars) : vars_(vars.begin(), vars.size()) {}
  VarList(const std::vector<VarHandle>& vars) : vars_(vars) {}  // NOLINT: implicit by design
  VarList(std::span<const VarHandle> vars) : vars_(vars) {}     // NOLINT: implicit by design
  [[nodiscard]] std::span<const VarHandle> span() const { return vars_; }

 private:
  std::span<const VarHandle> vars_;
};

namespace internal {
// BlockRef: a counted reference to an op in flight, the common part of
// OnStart and OnComplete. Holding one keeps the op's bookkeeping alive, so a
// late or repeated call is detected instead of touching freed memory. The
// ones an async op is handed are borrowed (they count nothing: the engine
// holds the op for the call, and an op's two callbacks would otherwise cost
// it four atomic updates); every copy, and a move of a borrowed one, counts.
class BlockRef {
 public:
  BlockRef(const BlockRef& other);
  BlockRef(BlockRef&& other) noexcept;
  BlockRef& operator=(BlockRef other) noexcept;
  ~BlockRef();

 protected:
  struct Borrowed {};
  explicit BlockRef(OprBlock* block);
  // REQUIRES: the caller keeps `block` alive while this object lives.
  BlockRef(OprBlock* block, Borrowed /*unused*/) : block_(block), counted_(false) {}
  // The op, or throws UsageError naming `who` for a moved-from callback.
  OprBlock* block(const char* who) const;

 private:
  OprBlock* block_;
  bool counted_ = true;  // false: borrowed
};
}  // namespace internal

// OnStart: called by an async op before it touches its vars' data (on the GPU
// this is where the op's stream waits for its inputs). Calling it more than
// once is harmless. Copyable; copies may be called from any thread.
class OnStart : public internal::BlockRef {
 public:
  void operator()() const;

 private:
  friend struct internal::OprBlock;
  using BlockRef::BlockRef;
};

// DeferredCheck: a check of a GPU op that can only run once the op's GPU
// work is done (it reads, say, a fault record a kernel wrote to host-mapped
// memory). It returns the op's error, or null.
using DeferredCheck = std::function<std::exception_ptr()>;

// OnComplete: called exactly once by an async op when it is done, with the
// error it failed with or null, or through WithCheck. A second call throws
// UsageError. Copyable; the op may hand it to another thread and call it
// there. An op whose last copy goes uncalled (it returned without calling
// it and kept none) fails with UsageError, rather than hold its vars
// forever.
class OnComplete : public internal::BlockRef {
 public:
  void operator()(std::exception_ptr error = nullptr) const;

  // Completes the op as operator()() does (in the Async engines its
  // dependents may start at once, ordered by CUDA events) and leaves
  // `check` to run on the host once the op's GPU work has finished, so that
  // no worker waits for the GPU. The check runs at the first wait that
  // covers that work: WaitForVar on a var the op wrote, a CPU op reading
  // one, or WaitForAll. An error it returns is the op's: it is recorded
  // like any op error (WaitForAll reports it), and the vars the op wrote
  // carry it unless written again since, so that WaitForVar on them
  // reports it and a CPU op reading them is skipped and passes it on. GPU
  // ops that read those vars before the check ran have run; they are not
  // undone. Where the op's GPU work is already done (a CPU op; the plain
  // engines, which sync the op's stream), `check` runs at once.
  void WithCheck(DeferredCheck check) const;

 private:
  friend struct internal::OprBlock;
  using BlockRef::BlockRef;
};

// An async op's function. The callbacks are borrowed for the call; copy
// on_complete to complete from another thread later.
using AsyncFn = std::function<void(RunContext, const OnStart&, const OnComplete&)>;
using SyncFn = std::function<void(RunContext)>;

// OpAttrs: how to run an op. The name is copied; it shows in errors, logs
// and profiles. For NewOperator only prop and name count (see there).
struct OpAttrs {
  Context ctx = Context::CPU();
  FnProperty prop = FnProperty::kNormal;
  int priority = 0;  // higher runs first among ready ops of a priority pool
  std::string_view name = {};
};

// OprHandle: names a pre-built op (NewOperator) of one engine, which can be
// pushed many times until DeleteOperator. Copyable; a default-constructed
// or null handle names none (it compares equal to nullptr, as the raw
// pointer of MXNet's engine does). Once its op is deleted the handle is
// stale: Push and DeleteOperator refuse it with UsageError.
class OprHandle {
 public:
  constexpr OprHandle() = default;
  constexpr OprHandle(std::nullptr_t) {}  // NOLINT(google-explicit-constructor): as a pointer
  static constexpr OprHandle FromBits(uint64_t bits) { return OprHandle(bits); }
  [[nodiscard]] constexpr uint64_t bits() const { return bits_; }
  [[nodiscard]] constexpr bool is_null() const { return bits_ == 0; }
  constexpr explicit operator bool() const { return bits_ != 0; }
  friend constexpr bool operator==(OprHandle, OprHandle) = default;

 private:
  constexpr explicit OprHandle(uint64_t bits) : bits_(bits) {}
  uint64_t bits_ = 0;
};

class Engine {
 public:
  Engine() = default;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Finishes every pushed op (errors are logged, not thrown), then stops the
  // workers. REQUIRES: not called from one of this engine's ops.
  virtual ~Engine() = default;

  // The process-wide engine, made on first use from EngineOptions::FromEnv().
  // It is drained and stopped at exit. In a child process after fork() the
  // first call makes a fresh engine for the child. Throws InvalidArgument
  // for a bad ENGINE_TYPE.
  static Engine& Get();

  // A new var. Never blocks.
  [[nodiscard]] virtual VarHandle NewVariable() = 0;

  // Deletes `var` once every op pushed before on it has finished, running
  // `on_delete` (e.g. to free the var's storage) at that point on `ctx`. The
  // handle is stale from this call on. Throws InvalidArgument for a stale var.
  virtual void DeleteVariable(VarHandle var, SyncFn on_delete = {},
                              Context ctx = Context::CPU()) = 0;

  // Pushes an async op: `fn` runs once its dependencies allow and must call
  // on_start() before touching data and on_complete() exactly once. Blocks
  // only while max_in_flight ops are pending (and polls briefly past
  // pace_in_flight while they finish), never on an engine worker.
  // Throws InvalidArgument for a stale or foreign var, Unavailable for a
  // context this engine has no workers for.
  virtual void PushAsync(AsyncFn fn, VarList const_vars, VarList mutable_vars,
                         const OpAttrs& attrs = {}) = 0;

  // Pushes a sync op, wrapped into the async form; an exception thrown by
  // `fn` is the op's error. With a bulk size above 1, consecutive kNormal
  // sync ops of one context pushed by one thread are merged into one op.
  virtual void PushSync(SyncFn fn, VarList const_vars, VarList mutable_vars,
                        const OpAttrs& attrs = {}) = 0;

  // An op that can be pushed many times; its vars are validated once here.
  // Only attrs.prop and attrs.name are the op's: attrs.ctx and
  // attrs.priority are ignored (and not checked), since every Push names
  // the context and priority of its own run, as MXNet's Push(op, exec_ctx,
  // priority) does; one operator may thus run on several devices. The
  // engine owns it until DeleteOperator. Throws like PushAsync.
  [[nodiscard]] virtual OprHandle NewOperator(AsyncFn fn, VarList const_vars, VarList mutable_vars,
                                              const OpAttrs& attrs = {}) = 0;
  // Pushes `op` to run on `ctx` with `priority`; these, not the attrs given
  // to NewOperator, are the run's. Throws Unavailable for a context this
  // engine has no workers for, InvalidArgument for a null or foreign
  // handle, UsageError for a deleted op.
  virtual void Push(OprHandle op, Context ctx, int priority = 0) = 0;
  // Releases `op`; pushes already made still run. The handle (and every
  // copy of it) is stale from this call on. Throws InvalidArgument for a
  // null or foreign handle, UsageError for a deleted op.
  virtual void DeleteOperator(OprHandle op) = 0;

  // Blocks until every op that writes `var` and was pushed before this call
  // has finished (on the GPU too), then rethrows the error the last of them
  // left on `var`, unless a wait has reported it already. Waits for nothing
  // else: it returns at once when no such write is pending, and never waits
  // for a free worker, for reads of `var` or for writes pushed after it (it
  // pushes no op; the var counts its pending writes). So a running op may
  // wait for a signal that the caller sends after WaitForVar returns.
  // Throws UsageError from inside an op, InvalidArgument for a stale or
  // foreign var.
  virtual void WaitForVar(VarHandle var) = 0;

  // Blocks until every op pushed before has finished (GPU streams
  // included), then reports every error that no wait has reported yet: one
  // is rethrown as it was thrown; several are thrown together as OpErrors
  // (error.h), in the order the ops failed, and each is logged. Throws
  // UsageError from inside an op.
  virtual void WaitForAll() = 0;

  // Reports the error `var` carries now, if no wait has, without waiting.
  virtual void Throw(VarHandle var) = 0;

  // Sets the calling thread's bulk size for PushSync (0 or 1: no bulking)
  // and returns the previous one. Flushes the thread's open bulk. NaiveEngine
  // never bulks: its pushes return after their op ran, whatever the size.
  virtual int SetBulkSize(int size) = 0;

  // The number of writes of `var` that have finished.
  [[nodiscard]] virtual uint64_t VarVersion(VarHandle var) const = 0;

  [[nodiscard]] virtual const EngineOptions& options() const = 0;
  // The engine's ENGINE_TYPE name, e.g. "ThreadedEnginePerDeviceAsync".
  [[nodiscard]] virtual std::string_view name() const = 0;
};

// A new engine of the given type and options. Throws InvalidArgument for bad
// options. The caller owns the engine; destroy it before the vars' users go.
std::unique_ptr<Engine> CreateEngine(const EngineOptions& options);

}  // namespace ember::engine
