#include "engine/internal/dependency_engine.h"

#include <algorithm>

#include <fmt/format.h>

#include "engine/error.h"
#include "engine/internal/bulk.h"
#include "engine/internal/fork_guard.h"
#include "engine/internal/logging.h"
#include "engine/internal/thread_state.h"

namespace ember::engine::internal {
namespace {

// kAsync ops run on the thread that makes them ready, but a chain of them
// completing inline would recurse; past this depth they go to a worker.
constexpr int kMaxInlineDepth = 4;

uint64_t NextEngineId() {
  static std::atomic<uint64_t> next{0};
  return next.fetch_add(1, std::memory_order_relaxed);
}

std::string EngineName(const EngineOptions& options) {
  return fmt::format("{}{}", ToString(options.type), options.async_gpu ? "Async" : "");
}

bool MustBlockOnBound() {
  const ThreadState& thread = CurrentThread();
  return !thread.is_worker && thread.running_op == nullptr;
}

}  // namespace

DependencyEngine::DependencyEngine(const EngineOptions& options)
    : options_(options),
      name_(EngineName(options)),
      fork_generation_(ForkGeneration()),
      id_(NextEngineId()),
      low_water_(std::max<int64_t>(1, options.max_in_flight * 3 / 4)),
      vars_(static_cast<uint16_t>(id_ % 0xFFFF + 1)),
      executor_(MakeExecutor(options, [this](OprBlock* block) { Execute(block); })) {
  Bulk::Register(this);
  Log().debug("{} started (engine #{})", name_, id_);
}

DependencyEngine::~DependencyEngine() {
  if (ForkGeneration() != fork_generation_) {
    Bulk::Unregister(this);
    // A child after fork(): the workers and whatever they held do not exist
    // here. Forget them; the parent's copy of this engine is unaffected.
    executor_->AbandonAfterFork();
    return;
  }
  try {
    Bulk::Flush(this);
  } catch (const std::exception& e) {
    Log().error("{}: flushing the bulk at destruction failed: {}", name_, e.what());
  }
  Bulk::Unregister(this);
  WaitUntilIdle();
  {
    MutexLock lock(&error_mu_);
    if (first_error_) Log().warn("{} destroyed with an unobserved op error", name_);
  }
  executor_->Stop();
  Log().debug("{} stopped (engine #{})", name_, id_);
}

// ---- Entry checks and var lists -------------------------------------------

void DependencyEngine::CheckUsable(std::string_view where, bool in_op_ok) const {
  if (ForkGeneration() != fork_generation_) {
    throw UsageError(fmt::format(
        "[{}] this {} was created before fork() and its workers do not exist in the child process; "
        "create a new engine in the child (Engine::Get() does so for the process-wide one)",
        where, name_));
  }
  if (!in_op_ok && CurrentThread().running_op != nullptr) {
    throw UsageError(
        fmt::format("[{}] called from inside op '{}': waiting inside an op can deadlock; declare "
                    "the var as an input of the op instead",
                    where, CurrentThread().running_op->name()));
  }
}

Var* DependencyEngine::Resolve(VarHandle handle, std::string_view where) const {
  Var* var = nullptr;
  const VarTable::Lookup found = vars_.Find(handle, &var);
  if (found != VarTable::Lookup::kOk) {
    throw InvalidArgument(
        fmt::format("[{}] var (handle {:#x}) {}", where, handle.bits(), VarTable::Describe(found)));
  }
  return var;
}

VarAccessList DependencyEngine::Normalize(VarList const_vars, VarList mutable_vars,
                                          std::string_view where, std::string_view op_name) const {
  VarAccessList vars;
  auto add = [&](VarList list, Access mode, const char* kind) {
    int position = 0;
    for (VarHandle handle : list.span()) {
      Var* var = nullptr;
      const VarTable::Lookup found = vars_.Find(handle, &var);
      if (found != VarTable::Lookup::kOk) {
        throw InvalidArgument(fmt::format("[{}] op '{}': {} var #{} (handle {:#x}) {}", where,
                                          op_name, kind, position, handle.bits(),
                                          VarTable::Describe(found)));
      }
      vars.push_back({var, mode, handle});
      ++position;
    }
  };
  add(const_vars, Access::kRead, "const");
  add(mutable_vars, Access::kWrite, "mutable");
  // One access per var, sorted by address: the order two-phase locking needs.
  std::sort(vars.begin(), vars.end(),
            [](const VarAccess& a, const VarAccess& b) { return a.var < b.var; });
  size_t out = 0;
  for (size_t i = 0; i < vars.size(); ++i) {
    if (out > 0 && vars[out - 1].var == vars[i].var) {
      vars[out - 1].mode = vars[out - 1].mode | vars[i].mode;
    } else {
      vars[out++] = vars[i];
    }
  }
  vars.resize(out);
  return vars;
}

// ---- Pushing ----------------------------------------------------------------

VarHandle DependencyEngine::NewVariable() {
  CheckUsable("Engine::NewVariable");
  return vars_.New();
}

void DependencyEngine::PushAsync(AsyncFn fn, VarList const_vars, VarList mutable_vars,
                                 const OpAttrs& attrs) {
  CheckUsable("Engine::PushAsync");
  FlushBulk();
  PushAsyncUnchecked(std::move(fn), const_vars, mutable_vars, attrs, "Engine::PushAsync");
}

void DependencyEngine::PushAsyncUnchecked(AsyncFn fn, VarList const_vars, VarList mutable_vars,
                                          const OpAttrs& attrs, std::string_view where) {
  if (!fn) throw InvalidArgument(fmt::format("[{}] op '{}': empty function", where, attrs.name));
  executor_->CheckContext(attrs.ctx, where, attrs.name);
  auto* op =
      new Operator(std::move(fn), Normalize(const_vars, mutable_vars, where, attrs.name), attrs);
  // The block takes over the operator's one reference.
  Submit(std::make_unique<OprBlock>(this, op, attrs.ctx, attrs.priority), where);
}

void DependencyEngine::PushSync(SyncFn fn, VarList const_vars, VarList mutable_vars,
                                const OpAttrs& attrs) {
  CheckUsable("Engine::PushSync");
  if (!fn)
    throw InvalidArgument(fmt::format("[Engine::PushSync] op '{}': empty function", attrs.name));
  if (Bulk::Append(this, fn, const_vars, mutable_vars, attrs)) return;
  FlushBulk();
  PushAsyncUnchecked(
      [fn = std::move(fn)](RunContext ctx, OnStart on_start, OnComplete on_complete) {
        on_start();
        fn(ctx);
        on_complete();
      },
      const_vars, mutable_vars, attrs, "Engine::PushSync");
}

OprHandle DependencyEngine::NewOperator(AsyncFn fn, VarList const_vars, VarList mutable_vars,
                                        const OpAttrs& attrs) {
  constexpr std::string_view kWhere = "Engine::NewOperator";
  CheckUsable(kWhere);
  if (!fn) throw InvalidArgument(fmt::format("[{}] op '{}': empty function", kWhere, attrs.name));
  executor_->CheckContext(attrs.ctx, kWhere, attrs.name);
  return new Operator(std::move(fn), Normalize(const_vars, mutable_vars, kWhere, attrs.name),
                      attrs);
}

void DependencyEngine::Push(OprHandle op, Context ctx, int priority) {
  constexpr std::string_view kWhere = "Engine::Push";
  CheckUsable(kWhere);
  if (op == nullptr) throw InvalidArgument("[Engine::Push] null operator handle");
  if (op->deleted.load(std::memory_order_acquire)) {
    throw UsageError(fmt::format("[Engine::Push] operator '{}' was deleted", op->name()));
  }
  executor_->CheckContext(ctx, kWhere, op->name());
  FlushBulk();
  op->Ref();
  Submit(std::make_unique<OprBlock>(this, op, ctx, priority), kWhere);
}

void DependencyEngine::DeleteOperator(OprHandle op) {
  if (op == nullptr) throw InvalidArgument("[Engine::DeleteOperator] null operator handle");
  if (op->deleted.exchange(true)) {
    throw UsageError(
        fmt::format("[Engine::DeleteOperator] operator '{}' was already deleted", op->name()));
  }
  op->Unref();
}

void DependencyEngine::DeleteVariable(VarHandle var, SyncFn on_delete, Context ctx) {
  constexpr std::string_view kWhere = "Engine::DeleteVariable";
  CheckUsable(kWhere);
  FlushBulk();
  executor_->CheckContext(ctx, kWhere, "DeleteVariable");
  Var* target = Resolve(var, kWhere);
  AsyncFn fn = [on_delete = std::move(on_delete)](RunContext rc, OnStart start, OnComplete done) {
    start();
    if (on_delete) on_delete(rc);
    done();
  };
  auto* op = new Operator(std::move(fn), VarAccessList{{target, Access::kWrite, var}},
                          OpAttrs{ctx, FnProperty::kDeleteVar, 0, "DeleteVariable"});
  auto block = std::make_unique<OprBlock>(this, op, ctx, 0);
  block->deletes_var = true;
  Submit(std::move(block), kWhere);
}

void DependencyEngine::Submit(std::unique_ptr<OprBlock> block, std::string_view where) {
  block->seq = next_seq_.fetch_add(1, std::memory_order_relaxed);
  AdmitOne();
  try {
    EnqueueOnVars(block.get(), where);
  } catch (...) {
    FinishOne();
    throw;
  }
  OprBlock* submitted = block.release();
  Notification done;
  const bool wait_here = executor_->inline_dispatch() && MustBlockOnBound();
  if (wait_here) submitted->done = &done;
  ReadyList ready;
  if (submitted->DecrementWait()) ready.Add(submitted);
  const bool ran_now = !ready.empty();
  Dispatch(ready);
  // NaiveEngine: a push returns once its op has finished, even when the op
  // completes from another thread. An op still waiting for its vars (pushed
  // from a foreign thread while another op holds them) finishes later.
  if (wait_here && ran_now) done.WaitForNotification();
}

// Two-phase locking: every var of the op is locked (in address order) before
// the op is queued on any of them, so two ops that share vars are queued in
// the same relative order on all of them.
void DependencyEngine::EnqueueOnVars(OprBlock* block,
                                     std::string_view where) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  const VarAccessList& vars = block->op->vars();
  block->wait.store(static_cast<int>(vars.size()) + 1, std::memory_order_relaxed);
  for (const VarAccess& access : vars) access.var->mu().Lock();
  for (const VarAccess& access : vars) {
    if (!VarTable::IsCurrent(access.handle, *access.var)) {
      for (const VarAccess& locked : vars) locked.var->mu().Unlock();
      throw InvalidArgument(fmt::format("[{}] op '{}': var (handle {:#x}) {}", where, block->name(),
                                        access.handle.bits(),
                                        VarTable::Describe(VarTable::Lookup::kStale)));
    }
  }
  ReadyList never_ready;  // the pusher's own count keeps the op from being ready
  block->links.resize(vars.size());
  for (size_t i = 0; i < vars.size(); ++i) {
    block->links[i] = VarLink{block, vars[i].var, vars[i].mode, nullptr};
    vars[i].var->AppendLocked(&block->links[i], &never_ready);
  }
  if (block->deletes_var) vars.front().var->BumpGenerationLocked();
  for (const VarAccess& access : vars) access.var->mu().Unlock();
}

// ---- Running ----------------------------------------------------------------

void DependencyEngine::Dispatch(const ReadyList& ready) {
  ThreadState& thread = CurrentThread();
  for (OprBlock* block : ready) {
    const bool run_inline = block->prop() == FnProperty::kAsync && !block->ctx.is_gpu() &&
                            thread.inline_depth < kMaxInlineDepth;
    if (run_inline && !executor_->inline_dispatch()) {
      ++thread.inline_depth;
      Execute(block);
      --thread.inline_depth;
    } else {
      executor_->Dispatch(block);
    }
  }
}

void DependencyEngine::Execute(OprBlock* block) {
  ThreadState& thread = CurrentThread();
  const OprBlock* outer = thread.running_op;
  thread.running_op = block;
  const bool skip = block->inherited_error() && block->prop() != FnProperty::kNoSkip &&
                    block->prop() != FnProperty::kDeleteVar;
  if (skip) {
    block->completed.store(true, std::memory_order_relaxed);
    OnOpComplete(block, nullptr);
  } else {
    try {
      block->op->fn()(RunContext{block->ctx, nullptr, block->name()}, block->MakeOnStart(),
                      block->MakeOnComplete());
    } catch (...) {
      if (!block->completed.exchange(true)) {
        OnOpComplete(block, std::current_exception());
      } else {
        Log().error("op '{}' threw after calling on_complete; the exception is dropped",
                    block->name());
      }
    }
  }
  thread.running_op = outer;
  block->Unref();  // the engine's reference; callbacks may still hold theirs
}

void DependencyEngine::OnOpStart(OprBlock* block) {
  // CPU ops need nothing: their inputs are complete when they are dispatched.
  // GPU stream waits and profiling hooks arrive with the GPU engine.
}

void DependencyEngine::OnOpComplete(OprBlock* block, std::exception_ptr error) {
  if (error) {
    RecordError(error);
  } else {
    error = block->inherited_error();
  }
  Notification* done = block->done;
  ReleaseVars(block, error);
  FinishOne();
  if (done != nullptr) done->Notify();
}

void DependencyEngine::ReleaseVars(OprBlock* block, const std::exception_ptr& error) {
  ReadyList ready;
  for (VarLink& link : block->links) {
    if (block->deletes_var) {
      vars_.Recycle(link.var);
    } else if (Writes(link.mode)) {
      link.var->CompleteWrite(error, &ready);
    } else {
      link.var->CompleteRead(&ready);
    }
  }
  Dispatch(ready);
}

// ---- In-flight accounting and waits -------------------------------------------

void DependencyEngine::AdmitOne() {
  const int64_t now = pending_.fetch_add(1) + 1;
  if (now <= options_.max_in_flight || !MustBlockOnBound()) return;
  bound_waiters_.fetch_add(1);
  {
    MutexLock lock(&wait_mu_);
    while (pending_.load() > low_water_) wait_cv_.Wait(&wait_mu_);
  }
  bound_waiters_.fetch_sub(1);
}

// The waiter counters are read after the decrement and incremented by
// waiters before they test pending_ (both sequentially consistent), so either
// the finisher sees the waiter or the waiter sees the new count.
void DependencyEngine::FinishOne() {
  const int64_t now = pending_.fetch_sub(1) - 1;
  const bool wake =
      (now == 0 && all_waiters_.load() > 0) || (now == low_water_ && bound_waiters_.load() > 0);
  if (!wake) return;
  MutexLock lock(&wait_mu_);
  wait_cv_.SignalAll();
}

void DependencyEngine::WaitUntilIdle() {
  all_waiters_.fetch_add(1);
  {
    MutexLock lock(&wait_mu_);
    while (pending_.load() != 0) wait_cv_.Wait(&wait_mu_);
  }
  all_waiters_.fetch_sub(1);
}

void DependencyEngine::RecordError(const std::exception_ptr& error) {
  MutexLock lock(&error_mu_);
  if (!first_error_) first_error_ = error;
}

void DependencyEngine::ForgetError(const std::exception_ptr& error) {
  MutexLock lock(&error_mu_);
  if (first_error_ == error) first_error_ = nullptr;
}

void DependencyEngine::WaitForVar(VarHandle handle) {
  constexpr std::string_view kWhere = "Engine::WaitForVar";
  CheckUsable(kWhere, /*in_op_ok=*/false);
  FlushBulk();
  Var* var = Resolve(handle, kWhere);
  // A no-skip read of the var: it runs once every earlier write is done, and
  // while it holds the read no later write can change the var's error.
  Notification done;
  std::exception_ptr seen;
  PushAsyncUnchecked(
      [&](RunContext, OnStart start, OnComplete complete) {
        start();
        seen = var->PeekError();
        done.Notify();
        complete();
      },
      {handle}, {}, OpAttrs{Context::CPU(), FnProperty::kNoSkip, 0, "WaitForVar"}, kWhere);
  done.WaitForNotification();
  if (!seen) return;
  var->ClearErrorIf(seen);
  ForgetError(seen);
  std::rethrow_exception(seen);
}

void DependencyEngine::WaitForAll() {
  CheckUsable("Engine::WaitForAll", /*in_op_ok=*/false);
  FlushBulk();
  WaitUntilIdle();
  std::exception_ptr error;
  {
    MutexLock lock(&error_mu_);
    error = std::exchange(first_error_, nullptr);
  }
  if (error) std::rethrow_exception(error);
}

void DependencyEngine::Throw(VarHandle handle) {
  CheckUsable("Engine::Throw");
  FlushBulk();
  std::exception_ptr error = Resolve(handle, "Engine::Throw")->TakeError();
  if (!error) return;
  ForgetError(error);
  std::rethrow_exception(error);
}

uint64_t DependencyEngine::VarVersion(VarHandle handle) const {
  CheckUsable("Engine::VarVersion");
  return Resolve(handle, "Engine::VarVersion")->version();
}

int DependencyEngine::SetBulkSize(int size) {
  CheckUsable("Engine::SetBulkSize");
  if (size < 0) {
    throw InvalidArgument(fmt::format("[Engine::SetBulkSize] size {} is negative", size));
  }
  return Bulk::SetSize(this, size);
}

void DependencyEngine::FlushBulk() { Bulk::Flush(this); }

}  // namespace ember::engine::internal
