#include "engine/internal/dependency_engine.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "engine/base/logging.h"
#include "engine/error.h"
#include "engine/internal/bulk.h"
#include "engine/internal/fork_guard.h"
#include "engine/internal/prefetch.h"
#include "engine/internal/thread_state.h"

namespace ember::engine::internal {
namespace {

// kAsync ops run on the thread that makes them ready, but a chain of them
// completing inline would recurse; past this depth they go to a worker.
constexpr int kMaxInlineDepth = 4;

// RecordError drops reported errors once this many are kept.
constexpr std::size_t kPruneErrorsAt = 64;

// An exception's message, for logs and OpErrors.
std::string DescribeException(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "(an exception not derived from std::exception)";
  }
}

// A var named twice by handles of different generations (a stale handle
// beside the current one of the reused slot) must still fail the push's
// stale check: the merged access takes a generation no var ever has.
void Merge(VarAccess* into, const VarAccess& repeat) {
  into->mode = into->mode | repeat.mode;
  if (into->generation != repeat.generation) into->generation = ~uint32_t{0};
}

// kDeleteVar marks the engine's own deletions, which run even on a failed
// var; an op pushed with it would escape skip-on-error without deleting.
void CheckUserProperty(const OpAttrs& attrs, std::string_view where) {
  if (attrs.prop == FnProperty::kDeleteVar) {
    throw InvalidArgument(fmt::format(
        "[{}] op '{}': FnProperty::kDeleteVar is the engine's own; use Engine::DeleteVariable",
        where, attrs.name));
  }
}

// Merges repeated vars into one access each (a write wins). Ops name few
// vars, so they are compared pairwise, which the branch predictor likes far
// better than sorting them; long lists are sorted first. The order of the
// result does not matter: pushes are serialized by push_mu_, not ordered
// by var address.
void MergeRepeats(VarAccesses* accesses) {
  constexpr std::size_t kPairwiseMax = 24;
  VarAccess* const begin = accesses->data();
  VarAccess* const end = begin + accesses->size();
  VarAccess* out = begin;
  if (accesses->size() > kPairwiseMax) {
    std::sort(begin, end, [](const VarAccess& a, const VarAccess& b) { return a.var < b.var; });
    for (VarAccess* in = begin; in < end; ++in) {
      if (out != begin && (out - 1)->var == in->var) {
        Merge(out - 1, *in);
      } else {
        *out++ = *in;
      }
    }
  } else {
    for (VarAccess* in = begin; in < end; ++in) {
      VarAccess* same = begin;
      while (same < out && same->var != in->var) ++same;
      if (same < out) {
        Merge(same, *in);
      } else {
        *out++ = *in;
      }
    }
  }
  accesses->resize(static_cast<std::size_t>(out - begin));
}

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
      operators_(static_cast<uint16_t>(id_ % 0xFFFF + 1)),
      in_flight_(options.max_in_flight, options.pace_in_flight),
      profiler_(options.profile_path.empty() ? nullptr
                                             : std::make_unique<Profiler>(options.profile_path)),
      backend_(MakeGpuBackend(options)),
      executor_(MakeExecutor(
          options, backend_ ? backend_->device_count() : 0,
          [this](OprBlock* block) { Execute(block); },
          [this](int device, StreamRank rank) { return backend_->StartWorker(device, rank); })) {
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
  operators_.ReleaseAll();  // first: what their functions push as they go still runs
  try {
    Bulk::Flush(this);
  } catch (const std::exception& e) {
    Log().error("{}: flushing the bulk at destruction failed: {}", name_, e.what());
  }
  Bulk::Unregister(this);
  in_flight_.WaitIdle();
  if (!checks_.empty()) {
    try {
      backend_->SynchronizeAll();
      RunDeferredChecks(/*all=*/true);
    } catch (const std::exception& e) {
      Log().error("{}: finishing the GPU work at destruction failed: {}", name_, e.what());
    }
  }
  {
    MutexLock lock(&error_mu_);
    for (const ErrorRef& error : errors_) {
      if (error.live()) {
        Log().warn("{} destroyed with an unreported error of op '{}': {}", name_, error->op(),
                   DescribeException(error->exception()));
      }
    }
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
                                 std::string_view op_name, VarAccesses* accesses,
                                 bool check_generation) const {
  accesses->clear();
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
      PrefetchForWrite(var);
      accesses->push_back({var, VarTable::GenerationOf(handle), mode});
      ++position;
    }
  };
  add(const_vars, Access::kRead, "const");
  add(mutable_vars, Access::kWrite, "mutable");
  MergeRepeats(accesses);
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
  PushUnchecked(std::move(fn), const_vars, mutable_vars, attrs, "Engine::PushAsync");
}

template <typename Fn>
void DependencyEngine::PushUnchecked(Fn fn, VarList const_vars, VarList mutable_vars,
                                     const OpAttrs& attrs, std::string_view where) {
  if (!fn) throw InvalidArgument(fmt::format("[{}] op '{}': empty function", where, attrs.name));
  CheckUserProperty(attrs, where);
  executor_->CheckContext(attrs.ctx, where, attrs.name);
  VarAccesses accesses;
  Normalize(const_vars, mutable_vars, where, attrs.name, &accesses);
  OprBlock* block = OprBlock::New(this, accesses, attrs);
  block->SetFn(std::move(fn));
  try {
    Submit(block, where);
  } catch (const InvalidArgument&) {
    // A stale var, found under its lock: name it by list and position.
    Normalize(const_vars, mutable_vars, where, attrs.name, &accesses, /*check_generation=*/true);
    throw;
  }
}

template void DependencyEngine::PushUnchecked<AsyncFn>(AsyncFn, VarList, VarList, const OpAttrs&,
                                                       std::string_view);
template void DependencyEngine::PushUnchecked<SyncFn>(SyncFn, VarList, VarList, const OpAttrs&,
                                                      std::string_view);

// The function is kept as a SyncFn (no wrapper, so no allocation), and run
// by Execute between the engine's own start and completion.
void DependencyEngine::PushSync(SyncFn fn, VarList const_vars, VarList mutable_vars,
                                const OpAttrs& attrs) {
  CheckUsable("Engine::PushSync");
  if (!fn) {
    throw InvalidArgument(fmt::format("[Engine::PushSync] op '{}': empty function", attrs.name));
  }
  if (Bulk::Append(this, fn, const_vars, mutable_vars, attrs)) return;
  FlushBulk();
  PushUnchecked(std::move(fn), const_vars, mutable_vars, attrs, "Engine::PushSync");
}

OprHandle DependencyEngine::NewOperator(AsyncFn fn, VarList const_vars, VarList mutable_vars,
                                        const OpAttrs& attrs) {
  constexpr std::string_view kWhere = "Engine::NewOperator";
  CheckUsable(kWhere);
  if (!fn) throw InvalidArgument(fmt::format("[{}] op '{}': empty function", kWhere, attrs.name));
  CheckUserProperty(attrs, kWhere);
  // attrs.ctx and attrs.priority are not the op's: every Push names its own
  // (see engine.h), so they are not checked here either.
  VarAccesses accesses;
  Normalize(const_vars, mutable_vars, kWhere, attrs.name, &accesses, /*check_generation=*/true);
  return operators_.Add(new Operator(std::move(fn), accesses, attrs));
}

void DependencyEngine::Push(OprHandle handle, Context ctx, int priority) {
  constexpr std::string_view kWhere = "Engine::Push";
  CheckUsable(kWhere);
  Operator* op = operators_.Acquire(handle, kWhere);  // the push's reference
  OprBlock* block = nullptr;
  try {
    executor_->CheckContext(ctx, kWhere, op->name());
    FlushBulk();
    block = OprBlock::New(this, op, ctx, priority);  // takes over the reference
  } catch (...) {
    op->Unref();
    throw;
  }
  Submit(block, kWhere);
}

void DependencyEngine::DeleteOperator(OprHandle handle) {
  constexpr std::string_view kWhere = "Engine::DeleteOperator";
  CheckUsable(kWhere, /*in_op_ok=*/true);
  operators_.Remove(handle, kWhere);
}

void DependencyEngine::DeleteVariable(VarHandle var, SyncFn on_delete, Context ctx) {
  constexpr std::string_view kWhere = "Engine::DeleteVariable";
  CheckUsable(kWhere);
  FlushBulk();
  executor_->CheckContext(ctx, kWhere, "DeleteVariable");
  Var* target = Resolve(var, kWhere);
  const VarAccess access{target, VarTable::GenerationOf(var), Access::kWrite};
  OprBlock* block = OprBlock::New(this, std::span<const VarAccess>(&access, 1),
                                  OpAttrs{ctx, FnProperty::kDeleteVar, 0, "DeleteVariable"});
  block->SetFn(on_delete ? std::move(on_delete) : SyncFn([](RunContext) {}));
  block->deletes_var = true;
  Submit(block, kWhere);
}

void DependencyEngine::Submit(OprBlock* block, std::string_view where) {
  block->seq = next_seq_.fetch_add(1, std::memory_order_relaxed);
  const bool may_block = MayBlock();
  in_flight_.Admit(may_block);
  try {
    EnqueueOnVars(block, where);
  } catch (...) {
    in_flight_.Finish();
    block->Destroy();
    throw;
  }
  OprBlock* submitted = block;
  // NaiveEngine: a push returns once its op has finished, even when the op
  // completes from another thread, or waits for its vars (pushed from
  // another thread while an op holds them) and is then run by the thread
  // that releases them. `done` lives on this frame, so the push must not
  // return before it is notified.
  std::optional<Notification> done;
  if (executor_->inline_dispatch() && may_block) submitted->done = &done.emplace();
  if (submitted->DecrementWait()) {
    ReadyList ready;
    ready.Add(submitted);
    Dispatch(ready);
  }
  if (done) done->WaitForNotification();
}

// Pushes are serialized by push_mu_, so two ops that share vars are queued
// in the same relative order on all of them, and a var's generation (bumped
// only here, by a delete) cannot change during a push: every var is checked
// first, then each is locked, appended to and unlocked in turn, so a
// completing worker waits for at most one var's append.
void DependencyEngine::EnqueueOnVars(OprBlock* block, std::string_view where) {
  const std::span<VarLink> links = block->links();
  block->wait.store(static_cast<int>(links.size()) + 1, std::memory_order_relaxed);
  AccessQueue::Reserve(links.size());  // so that no var's queue fails to grow
  {
    SpinLockHolder push(&push_mu_);
    for (const VarLink& link : links) {
      if (!VarTable::IsCurrent(link.generation, *link.var)) {
        throw InvalidArgument(fmt::format("[{}] op '{}': var (slot {}) {}", where, block->name,
                                          link.var->slot(),
                                          VarTable::Describe(VarTable::Lookup::kStale)));
      }
    }
    ReadyList never_ready;  // the pusher's own count keeps the op from being ready
    for (VarLink& link : links) {
      SpinLockHolder lock(&link.var->mu());
      link.var->AppendLocked(link, &never_ready);
      if (block->deletes_var) link.var->BumpGenerationLocked();
    }
  }
  AccessQueue::TrimReserve(links.size());
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
  const bool skip = block->inherited_error().live() && block->prop != FnProperty::kNoSkip &&
                    block->prop != FnProperty::kDeleteVar;
  if (skip) {
    block->completed.store(true, std::memory_order_relaxed);
    OnOpComplete(block, nullptr);
  } else {
    Run(block);
  }
  thread.running_op = outer;
  block->Unref();  // the engine's reference; callbacks may still hold theirs
}

// A sync op runs between the engine's own start and completion; an async op
// gets OnStart and OnComplete objects and completes when it says so. Errors
// are completed outside the handler, so that this thread's hold on the
// exception ends before other threads can see it.
void DependencyEngine::Run(OprBlock* block) {
  std::exception_ptr error;
  bool finished_sync = false;
  if (profiler_ != nullptr) {
    block->profile_row = profiler_->CurrentThreadRow();
    block->profile_begin_ns = profiler_->NowNs();
  }
  if (backend_ != nullptr) backend_->RangePush(block->c_name());
  try {
    if (block->ctx.is_gpu()) {
      block->gpu.stream = backend_->StreamFor(block->ctx.device_id, block->name, block->gpu.stream);
    }
    const RunContext context{block->ctx, block->gpu.stream.cuda, block->name,
                             block->inherited_error().live()};
    if (block->is_sync()) {
      OnOpStart(block);
      block->sync_fn()(context);
      finished_sync = true;
    } else {
      block->async_fn()(context, block->MakeOnStart(), block->MakeOnComplete());
    }
  } catch (...) {
    error = std::current_exception();
  }
  if (backend_ != nullptr) backend_->RangePop();
  if (finished_sync) {
    block->completed.store(true, std::memory_order_relaxed);
    OnOpComplete(block, nullptr);
  } else if (error && !block->completed.exchange(true)) {
    OnOpComplete(block, std::move(error));
  } else if (error) {
    Log().error("op '{}' threw after calling on_complete; the exception is dropped", block->name);
  }
}

// Without GPUs, nothing: an op's inputs are complete when it is dispatched.
// With them, a GPU op's stream waits for its inputs' GPU work (Async), and a
// CPU op host-waits for it (Async; the plain engines synced it already).
// That host wait may let deferred checks run: if one failed on an input,
// the op inherits its error and throws it (Run then skips the op).
void DependencyEngine::OnOpStart(OprBlock* block) {
  if (backend_ == nullptr) return;
  if (block->ctx.is_gpu()) {
    backend_->OnStartGpu(block->gpu_op());
    return;
  }
  if (!options_.async_gpu) return;
  backend_->OnStartCpu(block->name, block->links());
  if (checks_.empty()) return;
  RunDeferredChecks(/*all=*/false);
  if (block->inherited_error()) return;
  for (const VarLink& link : block->links()) {
    if (ErrorRef error = link.var->error()) {
      block->InheritError(error);
      std::rethrow_exception(error->exception());
    }
  }
}

void DependencyEngine::OnOpComplete(OprBlock* block, std::exception_ptr error,
                                    DeferredCheck check) {
  if (block->profile_row != 0) {
    profiler_->ThreadSpan(block->profile_row, block->name,
                          fmt::format("{}/{}", block->ctx.ToString(), ToString(block->prop)),
                          block->profile_begin_ns, profiler_->NowNs());
  }
  if (!error && block->gpu.stream) {
    try {
      backend_->OnCompleteGpu(block->gpu_op());  // a failed launch is the op's error
    } catch (...) {
      error = std::current_exception();
    }
  }
  if (!error && check) error = DeferOrRun(block, std::move(check));
  // An op that throws the error it inherited (see OnOpStart) passes it on
  // rather than failing anew.
  const ErrorRef& inherited = block->inherited_error();
  if (error && inherited && error == inherited->exception()) error = nullptr;
  // The op's own error is a new one; otherwise it passes on what it
  // inherited, unless a wait has reported that meanwhile.
  const ErrorRef outcome = error              ? RecordError(std::move(error), block->name)
                           : inherited.live() ? inherited
                                              : ErrorRef();
  Notification* done = block->done;
  // An op that completes itself on its worker is at its end (sync ops always
  // are), so the worker may run what the op made ready next. Ops completed
  // from another thread never hold their dependents back on that thread.
  const bool continuation = CurrentThread().running_op == block;
  ReleaseVars(block, outcome, continuation);
  in_flight_.Finish();
  if (done != nullptr) done->Notify();
}

// Registered before the op releases its vars, so that a waiter its writes
// wake finds the check; the op still holds its writes, so each var's next
// version is exactly the one its write gives.
std::exception_ptr DependencyEngine::DeferOrRun(OprBlock* block, DeferredCheck check) {
  if (block->gpu.fence.empty()) {
    try {
      return check();
    } catch (...) {
      return std::current_exception();
    }
  }
  PendingCheck pending{block->gpu.fence, std::move(check), std::string(block->name), {}};
  for (const VarLink& link : block->links()) {
    if (Writes(link.mode)) {
      pending.outputs.push_back({link.var, link.generation, link.var->version() + 1});
    }
  }
  checks_.Add(std::move(pending));
  return nullptr;
}

void DependencyEngine::RunDeferredChecks(bool all) {
  if (checks_.empty()) return;
  auto passed = [this](const GpuFence& fence) { return backend_->FencePassed(fence); };
  for (PendingCheck& pending : checks_.Take(passed, all)) {
    std::exception_ptr error;
    try {
      error = pending.check();
    } catch (...) {
      error = std::current_exception();
    }
    if (!error) continue;
    const ErrorRef record = RecordError(std::move(error), pending.op);
    for (const PendingCheck::Output& out : pending.outputs) {
      out.var->SetErrorAt(out.generation, out.version, record);
    }
  }
}

void DependencyEngine::ReleaseVars(OprBlock* block, const ErrorRef& error, bool continuation) {
  // As in Normalize: fetch every var's line at once, not one lock at a time.
  for (const VarLink& link : block->links()) PrefetchForWrite(link.var);
  ReadyList ready;
  WokenList woken;
  for (VarLink& link : block->links()) {
    if (block->deletes_var) {
      if (backend_ != nullptr) backend_->ForgetVar(link.var);
      vars_.Recycle(link.var);
    } else if (Writes(link.mode)) {
      // A waiter follows the GPU work of the write that wakes it: the op's
      // own fence, or for a write without one (a CPU op, a skipped op) the
      // GPU write before it, which the var's SyncObject still holds.
      const Var& var = *link.var;
      auto fill_fence = [&](VarWaiter& waiter) {
        waiter.fence = !block->gpu.fence.empty() ? block->gpu.fence : WriterFenceLocked(var);
      };
      link.var->CompleteWrite(error, &ready, &woken, fill_fence);
    } else {
      link.var->CompleteRead(&ready);
    }
  }
  woken.NotifyAll();
  Dispatch(ready, continuation);
}

// ---- Errors and waits ---------------------------------------------------------

ErrorRef DependencyEngine::RecordError(std::exception_ptr error, std::string_view op) {
  ErrorRef record = ErrorRef::Make(std::move(error), op);
  Log().debug("op '{}' failed: {}", op, DescribeException(record->exception()));
  MutexLock lock(&error_mu_);
  // Errors reported by WaitForVar or Throw are done with; drop them now and
  // then, so that a program that never calls WaitForAll keeps none.
  if (errors_.size() >= kPruneErrorsAt) {
    std::erase_if(errors_, [](const ErrorRef& e) { return !e.live(); });
  }
  errors_.push_back(record);
  return record;
}

void DependencyEngine::ReportIfFirst(const ErrorRef& error) {
  if (error && error->MarkReported()) std::rethrow_exception(error->exception());
}

GpuFence DependencyEngine::WriterFenceLocked(const Var& var) const {
  if (backend_ == nullptr || !options_.async_gpu) return {};
  return backend_->WriterFence(var);
}

// Waits for the writes pushed before this call, and for nothing else: the
// var counts its pending writes, and a waiter is woken by the completion
// that brings the var's version to the count it saw (var.h). No op is
// pushed, so no worker is needed and pending reads are not waited for.
void DependencyEngine::WaitForVar(VarHandle handle) {
  constexpr std::string_view kWhere = "Engine::WaitForVar";
  CheckUsable(kWhere, /*in_op_ok=*/false);
  FlushBulk();
  Var* var = Resolve(handle, kWhere);
  VarWaiter waiter;
  bool registered = false;
  {
    SpinLockHolder lock(&var->mu());
    if (!VarTable::IsCurrent(VarTable::GenerationOf(handle), *var)) {
      throw InvalidArgument(fmt::format("[{}] var (handle {:#x}) {}", kWhere, handle.bits(),
                                        VarTable::Describe(VarTable::Lookup::kStale)));
    }
    registered = var->AddWaiterLocked(&waiter);
    if (!registered) waiter.fence = WriterFenceLocked(*var);
  }
  if (registered) waiter.woken.WaitForNotification();
  if (!waiter.fence.empty()) {
    backend_->HostWait(waiter.fence, kWhere);
    // The write's deferred check, if any, can run now, and may leave an
    // error on the var that the write's completion did not.
    RunDeferredChecks(/*all=*/false);
    if (!waiter.error.live()) {
      waiter.error = var->ErrorAt(VarTable::GenerationOf(handle), waiter.target_version);
    }
  }
  ReportIfFirst(waiter.error);
}

// Every error since the last report: one is rethrown as it was thrown,
// several travel together in an OpErrors (and are logged one by one).
void DependencyEngine::WaitForAll() {
  CheckUsable("Engine::WaitForAll", /*in_op_ok=*/false);
  FlushBulk();
  in_flight_.WaitIdle();
  if (backend_ != nullptr) backend_->SynchronizeAll();  // the Async engines' GPU work
  RunDeferredChecks(/*all=*/true);
  std::vector<ErrorRef> errors;
  {
    MutexLock lock(&error_mu_);
    errors.swap(errors_);
  }
  std::erase_if(errors, [](ErrorRef& e) { return !e->MarkReported(); });
  if (errors.empty()) return;
  if (errors.size() == 1) std::rethrow_exception(errors.front()->exception());
  std::vector<std::exception_ptr> exceptions;
  std::vector<std::string> ops;
  std::string message =
      fmt::format("[Engine::WaitForAll] {} ops failed since the last report", errors.size());
  for (const ErrorRef& error : errors) {
    const std::string what = DescribeException(error->exception());
    Log().error("[Engine::WaitForAll] op '{}' failed: {}", error->op(), what);
    message += fmt::format("{} op '{}': {}", exceptions.empty() ? ":" : ";", error->op(), what);
    exceptions.push_back(error->exception());
    ops.push_back(error->op());
  }
  throw OpErrors(message, std::move(exceptions), std::move(ops));
}

void DependencyEngine::Throw(VarHandle handle) {
  CheckUsable("Engine::Throw");
  FlushBulk();
  ReportIfFirst(Resolve(handle, "Engine::Throw")->error());
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
