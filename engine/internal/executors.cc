#include "engine/internal/executors.h"

#include <fmt/format.h>

#include "engine/error.h"
#include "engine/internal/opr_block.h"
#include "engine/internal/worker_pool.h"

namespace ember::engine::internal {

void Executor::CheckContext(Context ctx, std::string_view where, std::string_view op) const {
  if (!ctx.is_gpu()) return;
  throw Unavailable(fmt::format(
      "[{}] op '{}': context {} is not available: this engine has no GPU workers (0 GPUs)", where,
      op, ctx.ToString()));
}

namespace {

class InlineExecutor final : public Executor {
 public:
  explicit InlineExecutor(RunFn run) : run_(std::move(run)) {}
  void Dispatch(OprBlock* block, bool /*continuation*/) override { run_(block); }
  bool inline_dispatch() const override { return true; }

 private:
  RunFn run_;
};

class PooledExecutor final : public Executor {
 public:
  PooledExecutor(const EngineOptions& options, RunFn run)
      : pool_("ember-pool", options.pool_workers, MakeFifoQueue(), std::move(run),
              /*continuations=*/true) {}
  void Dispatch(OprBlock* block, bool continuation) override { pool_.Push(block, continuation); }
  void Stop() override { pool_.Stop(); }
  void AbandonAfterFork() override { pool_.AbandonAfterFork(); }

 private:
  WorkerPool pool_;
};

class PerDeviceExecutor final : public Executor {
 public:
  PerDeviceExecutor(const EngineOptions& options, const RunFn& run)
      : cpu_("ember-cpu", options.cpu_workers, MakeFifoQueue(), run, /*continuations=*/true),
        cpu_priority_("ember-cpu-prio", options.cpu_priority_workers, MakePriorityQueue(), run,
                      /*continuations=*/false) {}

  void Dispatch(OprBlock* block, bool continuation) override {
    if (block->prop == FnProperty::kCPUPrioritized) {
      cpu_priority_.Push(block, continuation);
    } else {
      cpu_.Push(block, continuation);
    }
  }
  void Stop() override {
    cpu_.Stop();
    cpu_priority_.Stop();
  }
  void AbandonAfterFork() override {
    cpu_.AbandonAfterFork();
    cpu_priority_.AbandonAfterFork();
  }

 private:
  WorkerPool cpu_;
  WorkerPool cpu_priority_;
};

}  // namespace

std::unique_ptr<Executor> MakeExecutor(const EngineOptions& options, Executor::RunFn run) {
  switch (options.type) {
    case EngineType::kNaive:
      return std::make_unique<InlineExecutor>(std::move(run));
    case EngineType::kThreaded:
      return std::make_unique<PooledExecutor>(options, std::move(run));
    case EngineType::kThreadedPerDevice:
      return std::make_unique<PerDeviceExecutor>(options, std::move(run));
  }
  throw InvalidArgument("[MakeExecutor] unknown engine type");
}

}  // namespace ember::engine::internal
