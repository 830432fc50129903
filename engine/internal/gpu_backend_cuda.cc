// The CUDA GpuBackend (see gpu_backend.h): per-thread streams, and for the
// Async engines one SyncObject per var, filled with pooled events.

#include <memory>
#include <span>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <nvtx3/nvToolsExt.h>

#include "engine/base/device.h"
#include "engine/cuda/check.h"
#include "engine/error.h"
#include "engine/internal/cuda/gpu_timeline.h"
#include "engine/internal/cuda/stream_set.h"
#include "engine/internal/cuda/sync_object.h"
#include "engine/internal/gpu_backend.h"
#include "engine/internal/profiler.h"
#include "engine/internal/slot_chunks.h"
#include "engine/internal/var.h"

namespace ember::engine::internal {
namespace {

class CudaBackend final : public GpuBackend {
 public:
  CudaBackend(const EngineOptions& options, int devices)
      : async_(options.async_gpu),
        devices_(devices),
        streams_(devices, options.type == EngineType::kThreaded ? options.pool_workers : 0,
                 static_cast<std::size_t>(options.gpu_event_pool_size),
                 options.gpu_stream_priorities) {}

  ~CudaBackend() override {
    streams_.ForEach([](SyncStream& stream) {
      CudaLogIfError(cudaStreamSynchronize(stream.get()), "cudaStreamSynchronize (shutdown)");
    });
    timeline_.reset();  // flushes the GPU spans into the profiler
    streams_.Clear();
  }

  int device_count() const override { return devices_; }

  GpuStream StreamFor(int device, std::string_view op, GpuStream lent) override {
    // cudaGetDevice reads the runtime's per-thread state; cudaSetDevice goes to
    // the driver, so it is called only when an op switches this thread's device
    // (the op's own code may have switched it too). An op's worker keeps its
    // device current: that is the op's context, not a change to undo.
    int current = -1;
    CudaCheckForOp(cudaGetDevice(&current), "cudaGetDevice", op);
    if (current != device) CudaCheckForOp(cudaSetDevice(device), "cudaSetDevice", op);
    if (lent) return lent;
    SyncStream* stream = nullptr;
    try {
      stream = streams_.For(device);
    } catch (const CudaError& e) {
      throw CudaError(fmt::format("op '{}': making its stream: {}", op, e.what()));
    }
    return GpuStream{stream, stream->get()};
  }

  GpuStream StartWorker(int device, StreamRank rank) override {
    streams_.SetThreadRank(rank);
    return StreamFor(device, "(worker start)", {});
  }

  void OnStartGpu(GpuOp op) override {
    if (!async_) return;  // the plain engines synced every input at its completion
    SyncStream& stream = *op.state.stream.sync;
    stream.WaitFor(Waits(op.links), op.name);
    if (timeline_) op.state.profile_begin = GpuTimeline::Mark(stream.get());
  }

  void OnCompleteGpu(GpuOp op) override {
    CudaCheckLaunch("kernel launch", op.name);
    SyncStream& stream = *op.state.stream.sync;
    if (timeline_ && op.state.profile_begin != nullptr) {
      timeline_->Add(std::string(op.name), op.device, stream.id(),
                     std::exchange(op.state.profile_begin, nullptr),
                     GpuTimeline::Mark(stream.get()));
    }
    if (!async_) {
      CudaCheckForOp(cudaStreamSynchronize(stream.get()), "cudaStreamSynchronize", op.name);
      return;
    }
    const StreamEvent event = stream.Record(op.name);
    for (const VarLink& link : op.links) ObjectOf(*link.var).Completed(link.mode, event);
    op.state.fence = event;
  }

  void OnStartCpu(std::string_view op, std::span<const VarLink> links) override {
    if (!async_) return;
    const EventWaits waits = Waits(links);
    if (waits.empty()) return;
    const int64_t begin = profiler_ != nullptr ? profiler_->NowNs() : 0;
    HostWaitFor(waits, op);
    if (profiler_ != nullptr) {
      profiler_->ThreadSpan(profiler_->CurrentThreadRow(), fmt::format("host wait: {}", op),
                            "host-wait", begin, profiler_->NowNs());
    }
  }

  GpuFence WriterFence(const Var& var) override {
    EventWaits waits;
    ObjectOf(var).CollectWaits(Access::kRead, &waits);  // a read waits for the writer only
    return waits.empty() ? GpuFence{} : waits.front();
  }

  void HostWait(const GpuFence& fence, std::string_view who) override {
    HostWaitFor(std::span<const StreamEvent>(&fence, 1), who);
  }

  bool FencePassed(const GpuFence& fence) override { return fence.stream->QueryPassed(fence); }

  void ForgetVar(const Var* var) override { ObjectOf(*var).Clear(); }

  void SetProfiler(Profiler* profiler) override {
    profiler_ = profiler;
    timeline_ = profiler ? std::make_unique<GpuTimeline>(profiler, devices_) : nullptr;
  }
  void RangePush(const char* name) override { nvtxRangePushA(name); }
  void RangePop() override { nvtxRangePop(); }

  void SynchronizeAll() override {
    streams_.ForEach([](SyncStream& stream) {
      CudaCheck(cudaStreamSynchronize(stream.get()), "cudaStreamSynchronize (WaitForAll)");
    });
  }

 private:
  SyncObject& ObjectOf(const Var& var) { return objects_.At(var.slot()); }

  // The events an op with these vars must follow before touching them.
  EventWaits Waits(std::span<const VarLink> links) {
    EventWaits waits;
    for (const VarLink& link : links) ObjectOf(*link.var).CollectWaits(link.mode, &waits);
    return waits;
  }

  const bool async_;
  const int devices_;
  StreamSet streams_;
  SlotChunks<SyncObject> objects_;  // by var slot
  Profiler* profiler_ = nullptr;    // set once, before any op runs
  std::unique_ptr<GpuTimeline> timeline_;
};

}  // namespace

std::unique_ptr<GpuBackend> MakeGpuBackend(const EngineOptions& options) {
  const int devices = GpuCount();
  if (devices == 0) return nullptr;
  return std::make_unique<CudaBackend>(options, devices);
}

}  // namespace ember::engine::internal
