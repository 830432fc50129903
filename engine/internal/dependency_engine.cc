#include "engine/internal/dependency_engine.h"

#include <algorithm>
#include <optional>

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

// Engine workers and ops never block on the in-flight bound: the ops they
// would wait for may need them to finish.
bool MayBlock() {
  const ThreadState& thread = CurrentThread();
  return !thread.is_worker && thread.running_op == nullptr;
}

}  // namespace

DependencyEngine::DependencyEngine(const EngineOptions& options)
    : options_(options),
      name_(EngineName(options)),
      fork_generation_(ForkGeneration()),
      id_(NextEngineId()),
      vars_(static_cast<uint16_t>(id_ % 0xFFFF + 1)),
      in_flight_(options.max_in_flight),
      profiler_(options.profile_path.empty() ? nullptr
                                             : std::make_unique<Profiler>(options.profile_path)),
      backend_(MakeGpuBackend(options)),
      executor_(MakeExecutor(
          options, backend_ ? backend_->device_count() : 0,
          [this](OprBlock* block) { Execute(block); },
          [this](int device) { return backend_->StreamFor(device, "(worker start)", {}); })) {
  if (backend_ != nullptr) backend_->SetProfiler(profiler_.get());
  Bulk::Register(this);
  Log().debug("{} started (engine #{})", name_, id_);
}

DependencyEngine::~DependencyEngine() {
  if (ForkGeneration() != fork_generation_) {
    Bulk::Unregister(this);
    // A child after fork(): the workers and whatever they held do not exist
    // here, nor does a usable CUDA context. Forget them; the parent's copy of
    // this engine is unaffected.
    executor_->AbandonAfterFork();
    (void)backend_.release();
    return;
  }
  try {
    Bulk::Flush(this);
  } catch (const std::exception& e) {
    Log().error("{}: flushing the bulk at destruction failed: {}", name_, e.what());
  }
  Bulk::Unregister(this);
  in_flight_.WaitIdle();
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
        "[{}] this {} was created before fork() and its workers do not exist in the child "
        "process; create a new engine in the child (Engine::Get() does so for the process-wide "
        "one)",
        where, name_));
  }
  if (!in_op_ok && CurrentThread().running_op != nullptr) {
    throw UsageError(fmt::format(
        "[{}] called from inside op '{}': waiting inside an op can deadlock; declare the var as "
        "an input of the op instead",
        where, CurrentThread().running_op->name));
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

void DependencyEngine::Normalize(VarList const_vars, VarList mutable_vars, std::string_view where,
                                 std::string_view op_name, VarLinks* links,
                                 bool check_generation) const {
  // Sorted and merged as compact entries on the stack, then written once.
  struct Entry {
    Var* var;
    uint32_t generation;
    Access mode;
  };
  absl::InlinedVector<Entry, 32> entries;
  auto add = [&](VarList list, Access mode, const char* kind) {
    int position = 0;
    for (VarHandle handle : list.span()) {
      Var* var = nullptr;
      const VarTable::Lookup found =
          check_generation ? vars_.Find(handle, &var) : vars_.Locate(handle, &var);
      if (found != VarTable::Lookup::kOk) {
        throw InvalidArgument(fmt::format("[{}] op '{}': {} var #{} (handle {:#x}) {}", where,
                                          op_name, kind, position, handle.bits(),
                                          VarTable::Describe(found)));
      }
      // The var's line is usually in another core's cache (the worker that
      // last completed on it); start fetching it now, for writing, so the
      // misses of all the op's vars overlap instead of queueing up behind
      // each lock in EnqueueOnVars.
      __builtin_prefetch(var, 1);
      entries.push_back({var, VarTable::GenerationOf(handle), mode});
      ++position;
    }
  };
  add(const_vars, Access::kRead, "const");
  add(mutable_vars, Access::kWrite, "mutable");
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.var < b.var; });
  links->clear();
  for (const Entry& entry : entries) {
    if (!links->empty() && links->back().var == entry.var) {
      links->back().mode = links->back().mode | entry.mode;
    } else {
      links->push_back(VarLink{nullptr, entry.var, nullptr, entry.generation, entry.mode});
    }
  }
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
  auto block = std::make_unique<OprBlock>(this, std::move(fn), VarLinks(), attrs);
  Normalize(const_vars, mutable_vars, where, attrs.name, &block->links);
  try {
    Submit(std::move(block), where);
  } catch (const InvalidArgument&) {
    // A stale var, found under its lock: name it by list and position.
    VarLinks scratch;
    Normalize(const_vars, mutable_vars, where, attrs.name, &scratch, /*check_generation=*/true);
    throw;
  }
}

void DependencyEngine::PushSync(SyncFn fn, VarList const_vars, VarList mutable_vars,
                                const OpAttrs& attrs) {
  CheckUsable("Engine::PushSync");
  if (!fn) {
    throw InvalidArgument(fmt::format("[Engine::PushSync] op '{}': empty function", attrs.name));
  }
  if (Bulk::Append(this, fn, const_vars, mutable_vars, attrs)) return;
  FlushBulk();
  PushAsyncUnchecked(
      [fn = std::move(fn)](RunContext ctx, const OnStart& on_start, const OnComplete& on_complete) {
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
  VarLinks links;
  Normalize(const_vars, mutable_vars, kWhere, attrs.name, &links, /*check_generation=*/true);
  return new Operator(std::move(fn), std::move(links), attrs);
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
  AsyncFn fn = [on_delete = std::move(on_delete)](RunContext rc, const OnStart& start,
                                                  const OnComplete& done) {
    start();
    if (on_delete) on_delete(rc);
    done();
  };
  VarLinks links{VarLink{nullptr, target, nullptr, VarTable::GenerationOf(var), Access::kWrite}};
  auto block =
      std::make_unique<OprBlock>(this, std::move(fn), std::move(links),
                                 OpAttrs{ctx, FnProperty::kDeleteVar, 0, "DeleteVariable"});
  block->deletes_var = true;
  Submit(std::move(block), kWhere);
}

void DependencyEngine::Submit(std::unique_ptr<OprBlock> block, std::string_view where) {
  block->seq = next_seq_.fetch_add(1, std::memory_order_relaxed);
  const bool may_block = MayBlock();
  in_flight_.Admit(may_block);
  try {
    EnqueueOnVars(block.get(), where);
  } catch (...) {
    in_flight_.Finish();
    throw;
  }
  OprBlock* submitted = block.release();
  // NaiveEngine: a push returns once its op has finished, even when the op
  // completes from another thread. An op still waiting for its vars (pushed
  // from another thread while an op holds them) finishes later.
  std::optional<Notification> done;
  if (executor_->inline_dispatch() && may_block) submitted->done = &done.emplace();
  if (!submitted->DecrementWait()) return;
  ReadyList ready;
  ready.Add(submitted);
  Dispatch(ready);
  if (done) done->WaitForNotification();
}

// Two-phase locking: every var of the op is locked (in address order) before
// the op is queued on any of them, so two ops that share vars are queued in
// the same relative order on all of them.
void DependencyEngine::EnqueueOnVars(OprBlock* block,
                                     std::string_view where) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  VarLinks& links = block->links;
  block->wait.store(static_cast<int>(links.size()) + 1, std::memory_order_relaxed);
  for (const VarLink& link : links) link.var->mu().Lock();
  for (const VarLink& link : links) {
    if (!VarTable::IsCurrent(link.generation, *link.var)) {
      for (const VarLink& locked : links) locked.var->mu().Unlock();
      throw InvalidArgument(fmt::format("[{}] op '{}': var (slot {}) {}", where, block->name,
                                        link.var->slot(),
                                        VarTable::Describe(VarTable::Lookup::kStale)));
    }
  }
  ReadyList never_ready;  // the pusher's own count keeps the op from being ready
  for (VarLink& link : links) {
    link.block = block;
    link.var->AppendLocked(&link, &never_ready);
  }
  if (block->deletes_var) links.front().var->BumpGenerationLocked();
  for (const VarLink& link : links) link.var->mu().Unlock();
}

// ---- Running ----------------------------------------------------------------

void DependencyEngine::Dispatch(const ReadyList& ready, bool continuation) {
  ThreadState& thread = CurrentThread();
  for (OprBlock* block : ready) {
    const bool run_inline = block->prop == FnProperty::kAsync && !block->ctx.is_gpu() &&
                            thread.inline_depth < kMaxInlineDepth && !executor_->inline_dispatch();
    if (run_inline) {
      ++thread.inline_depth;
      Execute(block);
      --thread.inline_depth;
    } else {
      executor_->Dispatch(block, continuation);
    }
  }
}

void DependencyEngine::Execute(OprBlock* block) {
  ThreadState& thread = CurrentThread();
  const OprBlock* outer = thread.running_op;
  thread.running_op = block;
  const bool skip = block->inherited_error() && block->prop != FnProperty::kNoSkip &&
                    block->prop != FnProperty::kDeleteVar;
  if (skip) {
    block->completed.store(true, std::memory_order_relaxed);
    OnOpComplete(block, nullptr);
  } else {
    // The error is completed outside the handler, so that this thread's hold
    // on the exception ends before other threads can see it.
    std::exception_ptr error;
    if (profiler_ != nullptr) {
      block->profile_row = profiler_->CurrentThreadRow();
      block->profile_begin_ns = profiler_->NowNs();
    }
    if (backend_ != nullptr) backend_->RangePush(block->name.c_str());
    try {
      if (block->ctx.is_gpu())
        block->stream = backend_->StreamFor(block->ctx.device_id, block->name, block->stream);
      block->fn(RunContext{block->ctx, block->stream.cuda, block->name}, block->MakeOnStart(),
                block->MakeOnComplete());
    } catch (...) {
      error = std::current_exception();
    }
    if (backend_ != nullptr) backend_->RangePop();
    if (error && !block->completed.exchange(true)) {
      OnOpComplete(block, std::move(error));
    } else if (error) {
      Log().error("op '{}' threw after calling on_complete; the exception is dropped", block->name);
    }
  }
  thread.running_op = outer;
  block->Unref();  // the engine's reference; callbacks may still hold theirs
}

// Without GPUs, nothing: an op's inputs are complete when it is dispatched.
// With them, a GPU op's stream waits for its inputs' GPU work (Async), and a
// CPU op host-waits for it (Async; the plain engines synced it already).
void DependencyEngine::OnOpStart(OprBlock* block) {
  if (backend_ == nullptr) return;
  if (block->ctx.is_gpu()) {
    backend_->OnStartGpu(block);
  } else if (options_.async_gpu) {
    backend_->OnStartCpu(block);
  }
}

void DependencyEngine::OnOpComplete(OprBlock* block, std::exception_ptr error) {
  if (block->profile_row != 0) {
    profiler_->ThreadSpan(block->profile_row, block->name,
                          fmt::format("{}/{}", block->ctx.ToString(), ToString(block->prop)),
                          block->profile_begin_ns, profiler_->NowNs());
  }
  if (!error && block->stream.sync != nullptr) {
    try {
      backend_->OnCompleteGpu(block);  // a failed launch is the op's error
    } catch (...) {
      error = std::current_exception();
    }
  }
  if (error) {
    RecordError(error);
  } else {
    error = block->inherited_error();
  }
  Notification* done = block->done;
  // An op that completes itself on its worker is at its end (sync ops always
  // are), so the worker may run what the op made ready next. Ops completed
  // from another thread never hold their dependents back on that thread.
  const bool continuation = CurrentThread().running_op == block;
  ReleaseVars(block, error, continuation);
  in_flight_.Finish();
  if (done != nullptr) done->Notify();
}

void DependencyEngine::ReleaseVars(OprBlock* block, const std::exception_ptr& error,
                                   bool continuation) {
  // As in Normalize: fetch every var's line at once, not one lock at a time.
  for (const VarLink& link : block->links) __builtin_prefetch(link.var, 1);
  ReadyList ready;
  for (VarLink& link : block->links) {
    if (block->deletes_var) {
      if (backend_ != nullptr) backend_->ForgetVar(link.var);
      vars_.Recycle(link.var);
    } else if (Writes(link.mode)) {
      link.var->CompleteWrite(error, &ready);
    } else {
      link.var->CompleteRead(&ready);
    }
  }
  Dispatch(ready, continuation);
}

// ---- Errors and waits ---------------------------------------------------------

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
      [&](RunContext, const OnStart& start, const OnComplete& complete) {
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
  in_flight_.WaitIdle();
  if (backend_ != nullptr) backend_->SynchronizeAll();  // the Async engines' GPU work
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
