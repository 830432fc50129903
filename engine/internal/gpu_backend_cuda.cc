// The CUDA GpuBackend (see gpu_backend.h): per-thread streams, and for the
// Async engines one SyncObject per var, filled with pooled events.

#include <array>
#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nvtx3/nvToolsExt.h>

#include "engine/base/device.h"
#include "engine/error.h"

#include "engine/base/mutex.h"
#include "engine/cuda/check.h"
#include "engine/internal/cuda/sync_object.h"
#include "engine/internal/gpu_backend.h"
#include "engine/internal/opr_block.h"
#include "engine/internal/profiler.h"

namespace ember::engine::internal {
namespace {

// GPU spans of profiled ops, timed with CUDA events and put on the
// profiler's clock through one reference event per device whose host time is
// known (recorded and synchronized when profiling starts).
class GpuTimeline {
 public:
  GpuTimeline(Profiler* profiler, int devices) : profiler_(profiler) {
    for (int d = 0; d < devices; ++d) {
      CudaCheck(cudaSetDevice(d), "cudaSetDevice");
      cudaEvent_t ref = nullptr;
      CudaCheck(cudaEventCreate(&ref), "cudaEventCreate (profile reference)");
      CudaCheck(cudaEventRecord(ref, nullptr), "cudaEventRecord (profile reference)");
      CudaCheck(cudaEventSynchronize(ref), "cudaEventSynchronize (profile reference)");
      refs_.push_back({ref, profiler->NowNs()});
    }
  }
  ~GpuTimeline() {
    Resolve(/*wait=*/true);
    for (const Ref& ref : refs_) CudaLogIfError(cudaEventDestroy(ref.event), "cudaEventDestroy");
  }

  // A timing event recorded on `stream` now.
  static cudaEvent_t Mark(cudaStream_t stream) {
    cudaEvent_t event = nullptr;
    CudaCheck(cudaEventCreate(&event), "cudaEventCreate (profile)");
    CudaCheck(cudaEventRecord(event, stream), "cudaEventRecord (profile)");
    return event;
  }

  void Add(std::string name, int device, uint32_t stream, cudaEvent_t begin, cudaEvent_t end) {
    MutexLock lock(&mu_);
    pending_.push_back({std::move(name), device, stream, begin, end});
    if (pending_.size() >= kResolveEvery) ResolveLocked(/*wait=*/false);
  }

  void Resolve(bool wait) {
    MutexLock lock(&mu_);
    ResolveLocked(wait);
  }

 private:
  static constexpr size_t kResolveEvery = 1024;
  struct Ref {
    cudaEvent_t event;
    int64_t host_ns;
  };
  struct Pending {
    std::string name;
    int device;
    uint32_t stream;
    cudaEvent_t begin;
    cudaEvent_t end;
  };

  int64_t HostNs(int device, cudaEvent_t event) const {
    float ms = 0;
    CudaLogIfError(cudaEventElapsedTime(&ms, refs_[device].event, event), "cudaEventElapsedTime");
    return refs_[device].host_ns + static_cast<int64_t>(static_cast<double>(ms) * 1e6);
  }

  // Moves finished spans to the profiler; with `wait`, all of them.
  void ResolveLocked(bool wait) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<Pending> unfinished;
    for (Pending& span : pending_) {
      if (!wait && cudaEventQuery(span.end) == cudaErrorNotReady) {
        unfinished.push_back(std::move(span));
        continue;
      }
      CudaLogIfError(cudaEventSynchronize(span.end), "cudaEventSynchronize (profile)");
      profiler_->StreamSpan(span.name, span.device, span.stream, HostNs(span.device, span.begin),
                            HostNs(span.device, span.end));
      CudaLogIfError(cudaEventDestroy(span.begin), "cudaEventDestroy");
      CudaLogIfError(cudaEventDestroy(span.end), "cudaEventDestroy");
    }
    pending_ = std::move(unfinished);
  }

  Profiler* const profiler_;
  std::vector<Ref> refs_;
  Mutex mu_;
  std::vector<Pending> pending_ ABSL_GUARDED_BY(mu_);
};

// SyncObjects by var slot, in chunks made on first use and kept for the
// backend's life (like the VarTable's), so lookups take no lock.
class SyncObjectTable {
 public:
  ~SyncObjectTable() {
    for (auto& chunk : chunks_) delete[] chunk.load(std::memory_order_relaxed);
  }
  SyncObject& For(const Var& var) {
    const uint32_t slot = var.slot();
    auto& chunk = chunks_[slot >> kChunkBits];
    SyncObject* objects = chunk.load(std::memory_order_acquire);
    if (objects == nullptr) {
      MutexLock lock(&mu_);
      objects = chunk.load(std::memory_order_relaxed);
      if (objects == nullptr) {
        objects = new SyncObject[kChunkSize];
        chunk.store(objects, std::memory_order_release);
      }
    }
    return objects[slot & (kChunkSize - 1)];
  }

 private:
  static constexpr int kChunkBits = 12;
  static constexpr uint32_t kChunkSize = 1u << kChunkBits;
  std::array<std::atomic<SyncObject*>, (1u << 24) / kChunkSize> chunks_{};
  Mutex mu_;
};

// Streams by device. Per-thread mode (ThreadedEnginePerDevice): each worker
// thread makes its own stream per device on first use. Round-robin mode
// (ThreadedEngine): every device has `round_robin` streams, handed out to
// ops in turn, whichever worker runs them.
class StreamSet {
 public:
  StreamSet(int devices, int round_robin, std::size_t max_events)
      : id_(next_id_.fetch_add(1) + 1), devices_(devices), max_events_(max_events) {
    if (round_robin > 0) {
      int previous = 0;
      CudaCheck(cudaGetDevice(&previous), "cudaGetDevice");
      for (int d = 0; d < devices; ++d) {
        CudaCheck(cudaSetDevice(d), "cudaSetDevice");
        auto& ring = shared_.emplace_back();
        for (int i = 0; i < round_robin; ++i) ring.push_back(Make());
      }
      CudaCheck(cudaSetDevice(previous), "cudaSetDevice (restore)");
    }
    turns_ = std::vector<std::atomic<uint32_t>>(shared_.size());
  }

  // The stream the calling thread's next op on `device` uses. REQUIRES:
  // `device` is the thread's current device.
  SyncStream* For(int device) {
    if (!shared_.empty()) {
      const auto& ring = shared_[device];
      return ring[turns_[device].fetch_add(1, std::memory_order_relaxed) % ring.size()];
    }
    // Per thread, per set: the streams this thread made, by device. The id
    // (never reused) keeps a new set from finding a dead one's.
    thread_local uint64_t owner = 0;
    thread_local std::vector<SyncStream*> mine;
    if (owner != id_) {
      owner = id_;
      mine.assign(devices_, nullptr);
    }
    if (mine[device] == nullptr) mine[device] = Make();
    return mine[device];
  }

  // Calls `fn` on every stream made so far.
  void ForEach(const std::function<void(SyncStream&)>& fn) {
    MutexLock lock(&mu_);
    for (auto& stream : all_) fn(*stream);
  }

  // Destroys the streams (each drains first).
  void Clear() {
    MutexLock lock(&mu_);
    all_.clear();
  }

 private:
  SyncStream* Make() {
    cudaStream_t stream = nullptr;
    CudaCheck(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    MutexLock lock(&mu_);
    all_.push_back(std::make_unique<SyncStream>(stream, next_stream_id_++, max_events_));
    return all_.back().get();
  }

  static inline std::atomic<uint64_t> next_id_{0};
  const uint64_t id_;
  const int devices_;
  const std::size_t max_events_;
  std::vector<std::vector<SyncStream*>> shared_;  // by device (round-robin mode)
  std::vector<std::atomic<uint32_t>> turns_;      // by device
  Mutex mu_;
  std::vector<std::unique_ptr<SyncStream>> all_ ABSL_GUARDED_BY(mu_);
  uint32_t next_stream_id_ ABSL_GUARDED_BY(mu_) = 0;
};

class CudaBackend final : public GpuBackend {
 public:
  CudaBackend(const EngineOptions& options, int devices)
      : async_(options.async_gpu),
        devices_(devices),
        streams_(devices, options.type == EngineType::kThreaded ? options.pool_workers : 0,
                 static_cast<std::size_t>(options.gpu_event_pool_size)) {}

  ~CudaBackend() override {
    streams_.ForEach([](SyncStream& stream) {
      CudaLogIfError(cudaStreamSynchronize(stream.get()), "cudaStreamSynchronize (shutdown)");
    });
    timeline_.reset();  // flushes the GPU spans into the profiler
    streams_.Clear();
  }

  int device_count() const override { return devices_; }

  ThreadStream StreamFor(int device, std::string_view op, ThreadStream lent) override {
    // cudaGetDevice reads the runtime's per-thread state; cudaSetDevice goes to
    // the driver, so it is called only when an op switches this thread's device
    // (the op's own code may have switched it too).
    int current = -1;
    CudaCheckForOp(cudaGetDevice(&current), "cudaGetDevice", op);
    if (current != device) CudaCheckForOp(cudaSetDevice(device), "cudaSetDevice", op);
    if (lent.sync != nullptr) return lent;
    SyncStream* stream = nullptr;
    try {
      stream = streams_.For(device);
    } catch (const CudaError& e) {
      throw CudaError(fmt::format("op '{}': making its stream: {}", op, e.what()));
    }
    return ThreadStream{stream, stream->get()};
  }

  void OnStartGpu(OprBlock* block) override {
    if (!async_) return;  // the plain engines synced every input at its completion
    Stream(block).WaitFor(Waits(*block), block->name);
    if (timeline_) block->profile_gpu_begin = GpuTimeline::Mark(Stream(block).get());
  }

  void OnCompleteGpu(OprBlock* block) override {
    CudaCheckForOp(cudaGetLastError(), "kernel launch", block->name);
    SyncStream& stream = Stream(block);
    if (timeline_ && block->profile_gpu_begin != nullptr) {
      timeline_->Add(std::string(block->name), block->ctx.device_id, stream.id(),
                     static_cast<cudaEvent_t>(block->profile_gpu_begin),
                     GpuTimeline::Mark(stream.get()));
      block->profile_gpu_begin = nullptr;
    }
    if (!async_) {
      CudaCheckForOp(cudaStreamSynchronize(stream.get()), "cudaStreamSynchronize", block->name);
      return;
    }
    const StreamEvent event = stream.Record(block->name);
    for (const VarLink& link : block->links()) objects_.For(*link.var).Completed(link.mode, event);
    block->fence = ToFence(event);
  }

  void OnStartCpu(OprBlock* block) override {
    if (!async_) return;
    const EventWaits waits = Waits(*block);
    if (waits.empty()) return;
    const int64_t begin = profiler_ != nullptr ? profiler_->NowNs() : 0;
    HostWaitFor(waits, block->name);
    if (profiler_ != nullptr) {
      profiler_->ThreadSpan(profiler_->CurrentThreadRow(),
                            fmt::format("host wait: {}", block->name), "host-wait", begin,
                            profiler_->NowNs());
    }
  }

  GpuFence WriterFence(const Var& var) override {
    EventWaits waits;
    objects_.For(var).CollectWaits(Access::kRead, &waits);  // a read waits for the writer only
    return waits.empty() ? GpuFence{} : ToFence(waits.front());
  }

  void HostWait(const GpuFence& fence, std::string_view who) override {
    const StreamEvent event{static_cast<const SyncStream*>(fence.stream), fence.sequence,
                            static_cast<cudaEvent_t>(fence.event)};
    HostWaitFor(std::span<const StreamEvent>(&event, 1), who);
  }

  void ForgetVar(const Var* var) override { objects_.For(*var).Clear(); }

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
  // The events `block` must follow before touching its vars.
  EventWaits Waits(OprBlock& block) {
    EventWaits waits;
    for (const VarLink& link : block.links())
      objects_.For(*link.var).CollectWaits(link.mode, &waits);
    return waits;
  }

  static GpuFence ToFence(const StreamEvent& event) {
    return GpuFence{event.stream, event.sequence, event.event};
  }

  static SyncStream& Stream(OprBlock* block) {
    return *static_cast<SyncStream*>(block->stream.sync);
  }

  const bool async_;
  const int devices_;
  StreamSet streams_;
  SyncObjectTable objects_;
  Profiler* profiler_ = nullptr;  // set once, before any op runs
  std::unique_ptr<GpuTimeline> timeline_;
};

}  // namespace

std::unique_ptr<GpuBackend> MakeGpuBackend(const EngineOptions& options) {
  const int devices = GpuCount();
  if (devices == 0) return nullptr;
  return std::make_unique<CudaBackend>(options, devices);
}

}  // namespace ember::engine::internal
