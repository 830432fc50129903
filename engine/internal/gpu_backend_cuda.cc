// The CUDA GpuBackend (see gpu_backend.h): per-thread streams, and for the
// Async engines one SyncObject per var, filled with pooled events.

#include <array>
#include <atomic>
#include <vector>

#include <fmt/format.h>

#include "engine/internal/cuda/cuda_check.h"
#include "engine/internal/cuda/event_pool.h"
#include "engine/internal/cuda/sync_object.h"
#include "engine/internal/gpu_backend.h"
#include "engine/internal/mutex.h"
#include "engine/internal/opr_block.h"

namespace ember::engine::internal {
namespace {

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

class CudaBackend final : public GpuBackend {
 public:
  CudaBackend(const EngineOptions& options, int devices)
      : async_(options.async_gpu), id_(next_id_.fetch_add(1) + 1), devices_(devices) {
    for (int d = 0; d < devices; ++d) {
      pools_.push_back(EventPool::Create(d, options.gpu_event_pool_size));
    }
  }

  ~CudaBackend() override {
    MutexLock lock(&mu_);
    for (auto& stream : streams_) {
      CudaLogIfError(cudaStreamSynchronize(stream->get()), "cudaStreamSynchronize (shutdown)");
      CudaLogIfError(cudaStreamDestroy(stream->get()), "cudaStreamDestroy");
    }
  }

  int device_count() const override { return devices_; }

  ThreadStream StreamForThread(int device) override {
    CudaCheck(cudaSetDevice(device), "cudaSetDevice");
    // Per thread, per backend: the streams this thread made, by device. The
    // id (never reused) keeps a new backend from finding a dead one's.
    thread_local uint64_t owner = 0;
    thread_local std::vector<SyncStream*> mine;
    if (owner != id_) {
      owner = id_;
      mine.assign(devices_, nullptr);
    }
    if (mine[device] == nullptr) mine[device] = MakeStream();
    return ThreadStream{mine[device], mine[device]->get()};
  }

  void OnStartGpu(OprBlock* block) override {
    if (!async_) return;  // the plain engines synced every input at its completion
    std::vector<EventRef> waits;
    for (const VarLink& link : block->links)
      objects_.For(*link.var).CollectWaits(link.mode, &waits);
    Stream(block).WaitFor(waits, block->name);
  }

  void OnCompleteGpu(OprBlock* block) override {
    CudaCheck(cudaGetLastError(), fmt::format("kernel launch of op '{}'", block->name));
    SyncStream& stream = Stream(block);
    if (!async_) {
      CudaCheck(cudaStreamSynchronize(stream.get()),
                fmt::format("cudaStreamSynchronize after op '{}'", block->name));
      return;
    }
    const EventRef event = pools_[block->ctx.device_id]->Record(stream);
    for (const VarLink& link : block->links) objects_.For(*link.var).Completed(link.mode, event);
  }

  void OnStartCpu(OprBlock* block) override {
    if (!async_) return;
    std::vector<EventRef> waits;
    for (const VarLink& link : block->links)
      objects_.For(*link.var).CollectWaits(link.mode, &waits);
    HostWaitFor(waits, block->name);
  }

  void ForgetVar(const Var* var) override { objects_.For(*var).Clear(); }

  void SynchronizeAll() override {
    MutexLock lock(&mu_);
    for (auto& stream : streams_) {
      CudaCheck(cudaStreamSynchronize(stream->get()), "cudaStreamSynchronize (WaitForAll)");
    }
  }

 private:
  static SyncStream& Stream(OprBlock* block) {
    return *static_cast<SyncStream*>(block->stream.sync);
  }

  SyncStream* MakeStream() {
    cudaStream_t stream = nullptr;
    CudaCheck(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    MutexLock lock(&mu_);
    streams_.push_back(std::make_unique<SyncStream>(stream, next_stream_id_++));
    return streams_.back().get();
  }

  static inline std::atomic<uint64_t> next_id_{0};
  const bool async_;
  const uint64_t id_;
  const int devices_;
  std::vector<std::shared_ptr<EventPool>> pools_;  // by device
  SyncObjectTable objects_;
  Mutex mu_;
  std::vector<std::unique_ptr<SyncStream>> streams_ ABSL_GUARDED_BY(mu_);
  uint32_t next_stream_id_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace

std::unique_ptr<GpuBackend> MakeGpuBackend(const EngineOptions& options) {
  const int devices = CudaDeviceCount();
  if (devices == 0) return nullptr;
  return std::make_unique<CudaBackend>(options, devices);
}

}  // namespace ember::engine::internal
