#pragma once

// DependencyEngine: the one implementation of Engine. It tracks every var's
// readers and writers (Var) and hands ops whose dependencies are met to an
// Executor, which is what distinguishes NaiveEngine, ThreadedEngine and
// ThreadedEnginePerDevice.
//
// Life of an op: Push* validates and normalizes its vars, counts it in
// in_flight_ (blocking past max_in_flight unless called by a worker or an
// op), and queues it on its vars, one push at a time (push_mu_). The
// thread that grants its last var dispatches it. Execute runs it, or skips
// it when an input carries a live error (op_error.h); OnOpComplete releases
// its vars, which dispatches the ops they were holding back and wakes the
// WaitForVar callers whose writes are done.
//
// Thread safety: thread-safe (see engine.h).

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "engine/base/mutex.h"
#include "engine/base/spin_lock.h"
#include "engine/engine.h"
#include "engine/internal/deferred_checks.h"
#include "engine/internal/executors.h"
#include "engine/internal/gpu_backend.h"
#include "engine/internal/in_flight.h"
#include "engine/internal/operator_table.h"
#include "engine/internal/opr_block.h"
#include "engine/internal/profiler.h"
#include "engine/internal/var_table.h"

namespace ember::engine::internal {

class DependencyEngine final : public Engine {
 public:
  explicit DependencyEngine(const EngineOptions& options);
  ~DependencyEngine() override;

  VarHandle NewVariable() override;
  void DeleteVariable(VarHandle var, SyncFn on_delete, Context ctx) override;
  void PushAsync(AsyncFn fn, VarList const_vars, VarList mutable_vars,
                 const OpAttrs& attrs) override;
  void PushSync(SyncFn fn, VarList const_vars, VarList mutable_vars, const OpAttrs& attrs) override;
  OprHandle NewOperator(AsyncFn fn, VarList const_vars, VarList mutable_vars,
                        const OpAttrs& attrs) override;
  void Push(OprHandle op, Context ctx, int priority) override;
  void DeleteOperator(OprHandle op) override;
  void WaitForVar(VarHandle var) override;
  void WaitForAll() override;
  void Throw(VarHandle var) override;
  int SetBulkSize(int size) override;
  uint64_t VarVersion(VarHandle var) const override;
  const EngineOptions& options() const override { return options_; }
  std::string_view name() const override { return name_; }

  // Called through OnStart / OnComplete. OnOpStart throws the error of an
  // input found by a deferred check run in it (the op is then skipped).
  void OnOpStart(OprBlock* block);
  void OnOpComplete(OprBlock* block, std::exception_ptr error, DeferredCheck check = {});

 private:
  friend class Bulk;

  // Entry checks of every public call: not a forked child; `in_op_ok` false
  // also refuses calls from inside an op (waits).
  void CheckUsable(std::string_view where, bool in_op_ok = true) const;
  Var* Resolve(VarHandle handle, std::string_view where) const;
  // Resolves and normalizes an op's vars into `accesses`: one per var, a
  // write wins. Stale handles are caught later, under push_mu_, unless
  // `check_generation` is set (the error path sets it to name the
  // offending var).
  void Normalize(VarList const_vars, VarList mutable_vars, std::string_view where,
                 std::string_view op_name, VarAccesses* accesses,
                 bool check_generation = false) const;

  // PushAsync and PushSync after their entry checks: `Fn` is AsyncFn or
  // SyncFn, kept as it is in the op's block.
  template <typename Fn>
  void PushUnchecked(Fn fn, VarList const_vars, VarList mutable_vars, const OpAttrs& attrs,
                     std::string_view where);
  // Counts, queues and (when ready) dispatches a new block. Takes ownership.
  void Submit(OprBlock* block, std::string_view where);
  void EnqueueOnVars(OprBlock* block, std::string_view where);
  // Hands ready ops to the executor; `continuation` when the calling thread
  // made them ready by finishing the op it runs.
  void Dispatch(const ReadyList& ready, bool continuation = false);
  void Execute(OprBlock* block);
  // Runs a block that is not skipped.
  void Run(OprBlock* block);
  void ReleaseVars(OprBlock* block, const ErrorRef& error, bool continuation);

  // A new unreported error of op `op`, remembered for WaitForAll.
  ErrorRef RecordError(std::exception_ptr error, std::string_view op);
  // Keeps `check` until the GPU has passed block->fence, or runs it now
  // (returning its error) when the block has no fence.
  std::exception_ptr DeferOrRun(OprBlock* block, DeferredCheck check);
  // Runs the deferred checks whose GPU work is done (every one with `all`,
  // after a full synchronize); a failure is recorded and left on the vars
  // the op wrote that are still at its write.
  void RunDeferredChecks(bool all);
  // Reports `error` if no wait has: marks it and rethrows it.
  static void ReportIfFirst(const ErrorRef& error);
  // The GPU work of `var`'s last finished write, for a waiter (Async
  // engines; empty otherwise). REQUIRES: var->mu() held.
  GpuFence WriterFenceLocked(const Var& var) const;
  void FlushBulk();

  // Constant after construction.
  const EngineOptions options_;
  const std::string name_;
  const uint64_t fork_generation_;
  const uint64_t id_;

  // Thread-safe by themselves.
  VarTable vars_;
  OperatorTable operators_;
  InFlight in_flight_;
  std::atomic<uint64_t> next_seq_{0};
  // Serializes the queueing of pushes on their vars (EnqueueOnVars). A spin
  // lock: it is held for a few hundred nanoseconds, and a pusher that slept
  // on it would pay a context switch per op.
  SpinLock push_mu_;
  // Null unless profiling. Declared before the backend, which flushes its
  // GPU spans into it when destroyed.
  std::unique_ptr<Profiler> profiler_;  // the pointer is constant
  // Null without GPUs. Declared before the executor: it outlives the workers
  // that use its streams.
  std::unique_ptr<GpuBackend> backend_;  // the pointer is constant
  std::unique_ptr<Executor> executor_;   // the pointer is constant
  DeferredChecks checks_;

  // Every op error not yet reported by WaitForAll, in the order the ops
  // failed (those reported by WaitForVar or Throw are skipped and pruned).
  Mutex error_mu_;
  std::vector<ErrorRef> errors_ ABSL_GUARDED_BY(error_mu_);
};

}  // namespace ember::engine::internal
