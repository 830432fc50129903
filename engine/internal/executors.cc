#include "engine/internal/executors.h"

#include <chrono>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "engine/error.h"
#include "engine/internal/opr_block.h"
#include "engine/internal/worker_pool.h"

namespace ember::engine::internal {

void Executor::CheckContext(Context ctx, std::string_view where, std::string_view op) const {
  if (!ctx.is_gpu() || (ctx.device_id >= 0 && ctx.device_id < gpus_)) return;
  throw Unavailable(
      fmt::format("[{}] op '{}': context {} is not available: this engine has {} GPU(s)", where, op,
                  ctx.ToString(), gpus_));
}

namespace {

std::chrono::microseconds CpuSpin(const EngineOptions& options) {
  return std::chrono::microseconds(options.cpu_worker_spin_us);
}
std::chrono::microseconds GpuSpin(const EngineOptions& options) {
  return std::chrono::microseconds(options.gpu_worker_spin_us);
}

class InlineExecutor final : public Executor {
 public:
  InlineExecutor(int gpus, RunFn run) : Executor(gpus), run_(std::move(run)) {}
  void Dispatch(OprBlock* block, bool /*continuation*/) override { run_(block); }
  bool inline_dispatch() const override { return true; }

 private:
  RunFn run_;
};

class PooledExecutor final : public Executor {
 public:
  PooledExecutor(const EngineOptions& options, int gpus, RunFn run)
      : Executor(gpus),
        pool_("ember-pool", options.pool_workers, MakeFifoQueue(CpuSpin(options)), std::move(run),
              {.continuations = true}) {}
  void Dispatch(OprBlock* block, bool continuation) override { pool_.Push(block, continuation); }
  void Stop() override { pool_.Stop(); }
  void AbandonAfterFork() override { pool_.AbandonAfterFork(); }

 private:
  WorkerPool pool_;
};

// The pools of one device: one per kind of work, so that copies and
// prioritized ops never queue behind normal ones.
struct DevicePools {
  DevicePools(int device, const EngineOptions& options, const Executor::RunFn& run,
              const Executor::GpuThreadInit& init)
      : normal(Name(device, ""), options.gpu_workers, Fifo(options), run,
               Lane(device, options, init, StreamRank::kCompute)),
        copy_in(Name(device, "-in"), options.gpu_copy_workers, Fifo(options), run,
                Lane(device, options, init, StreamRank::kCopy)),
        copy_out(Name(device, "-out"), options.gpu_copy_workers, Fifo(options), run,
                 Lane(device, options, init, StreamRank::kCopy)),
        priority(Name(device, "-prio"), options.gpu_priority_workers,
                 MakePriorityQueue(GpuSpin(options)), run,
                 {.gpu_device = device, .make_stream = [init, device] {
                    return init(device, StreamRank::kPrioritized);
                  }}) {}

  static std::string Name(int device, const char* kind) {
    return fmt::format("ember-gpu{}{}", device, kind);
  }
  static std::unique_ptr<TaskQueue> Fifo(const EngineOptions& options) {
    return MakeFifoQueue(GpuSpin(options));
  }
  // FIFO GPU pools take continuations: their own, and in the Async engines
  // other pools' of the device (see worker_pool.h).
  static WorkerPoolOptions Lane(int device, const EngineOptions& options,
                                const Executor::GpuThreadInit& init, StreamRank rank) {
    return {.continuations = true,
            .gpu_device = device,
            .make_stream = [init, device, rank] { return init(device, rank); },
            .lend_streams = options.async_gpu};
  }

  WorkerPool& For(FnProperty prop) {
    switch (prop) {
      case FnProperty::kCopyToGPU:
        return copy_in;
      case FnProperty::kCopyFromGPU:
        return copy_out;
      case FnProperty::kCPUPrioritized:
      case FnProperty::kGPUPrioritized:
        return priority;
      default:
        return normal;
    }
  }
  void ForEach(const std::function<void(WorkerPool&)>& fn) {
    for (WorkerPool* pool : {&normal, &copy_in, &copy_out, &priority}) fn(*pool);
  }

  WorkerPool normal;
  WorkerPool copy_in;
  WorkerPool copy_out;
  WorkerPool priority;
};

class PerDeviceExecutor final : public Executor {
 public:
  PerDeviceExecutor(const EngineOptions& options, int gpus, const RunFn& run,
                    const GpuThreadInit& gpu_thread_init)
      : Executor(gpus),
        cpu_("ember-cpu", options.cpu_workers, MakeFifoQueue(CpuSpin(options)), run,
             {.continuations = true}),
        cpu_priority_("ember-cpu-prio", options.cpu_priority_workers,
                      MakePriorityQueue(CpuSpin(options)), run) {
    for (int d = 0; d < gpus; ++d) {
      gpu_.push_back(std::make_unique<DevicePools>(d, options, run, gpu_thread_init));
    }
  }

  void Dispatch(OprBlock* block, bool continuation) override {
    if (block->ctx.is_gpu()) {
      gpu_[block->ctx.device_id]->For(block->prop).Push(block, continuation);
    } else if (block->prop == FnProperty::kCPUPrioritized) {
      cpu_priority_.Push(block, continuation);
    } else {
      cpu_.Push(block, continuation);
    }
  }
  void Stop() override {
    cpu_.Stop();
    cpu_priority_.Stop();
    for (auto& device : gpu_) device->ForEach([](WorkerPool& pool) { pool.Stop(); });
  }
  void AbandonAfterFork() override {
    cpu_.AbandonAfterFork();
    cpu_priority_.AbandonAfterFork();
    for (auto& device : gpu_) device->ForEach([](WorkerPool& pool) { pool.AbandonAfterFork(); });
  }

 private:
  WorkerPool cpu_;
  WorkerPool cpu_priority_;
  std::vector<std::unique_ptr<DevicePools>> gpu_;
};

}  // namespace

std::unique_ptr<Executor> MakeExecutor(const EngineOptions& options, int gpus, Executor::RunFn run,
                                       const Executor::GpuThreadInit& gpu_thread_init) {
  switch (options.type) {
    case EngineType::kNaive:
      return std::make_unique<InlineExecutor>(gpus, std::move(run));
    case EngineType::kThreaded:
      return std::make_unique<PooledExecutor>(options, gpus, std::move(run));
    case EngineType::kThreadedPerDevice:
      return std::make_unique<PerDeviceExecutor>(options, gpus, run, gpu_thread_init);
  }
  throw InvalidArgument("[MakeExecutor] unknown engine type");
}

}  // namespace ember::engine::internal
