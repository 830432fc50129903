// The device manager on CUDA's stream-ordered allocator: a cudaMemPool_t of
// its own that keeps freed memory (release threshold: unlimited), with
// cudaMallocFromPoolAsync / cudaFreeAsync ordered on the users' streams.
//
// Take on a known stream allocates in that stream's order (nothing to
// wait for); on an unknown one, in the order of the manager's own stream,
// whose event the first user then follows. Give frees in the order of the
// last user's stream when there is one, else on the manager's stream after
// it waited for every user.

#include <cstdint>
#include <limits>
#include <memory>

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "engine/base/mutex.h"
#include "engine/cuda/check.h"
#include "storage/internal/fences.h"
#include "storage/internal/gpu_storage.h"
#include "storage/internal/memory_counters.h"

namespace ember::storage::internal {
namespace {

class CudaAsyncPool final : public StorageManager {
 public:
  explicit CudaAsyncPool(int device) : StorageManager(MemoryKind::kDevice, device) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location = cudaMemLocation{cudaMemLocationTypeDevice, device};
    CudaCheck(cudaMemPoolCreate(&pool_, &props), "cudaMemPoolCreate");
    uint64_t keep_all = std::numeric_limits<uint64_t>::max();
    CudaCheck(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep_all),
              "cudaMemPoolSetAttribute (release threshold)");
    int previous = 0;
    CudaCheck(cudaGetDevice(&previous), "cudaGetDevice");
    CudaCheck(cudaSetDevice(device), "cudaSetDevice");
    const cudaError_t status = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
    CudaCheck(cudaSetDevice(previous), "cudaSetDevice (restore)");
    CudaCheck(status, "cudaStreamCreate (stream-ordered pool)");
  }

  ~CudaAsyncPool() override {
    CudaLogIfError(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    CudaLogIfError(cudaStreamDestroy(stream_), "cudaStreamDestroy");
    CudaLogIfError(cudaMemPoolDestroy(pool_), "cudaMemPoolDestroy");
  }

  MemoryStats Stats() const override {
    MemoryStats stats;
    {
      MutexLock lock(&mu_);
      stats = counters_.stats();
    }
    uint64_t reserved = 0;
    uint64_t peak = 0;
    CudaCheck(cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReservedMemCurrent, &reserved),
              "cudaMemPoolGetAttribute (reserved)");
    CudaCheck(cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReservedMemHigh, &peak),
              "cudaMemPoolGetAttribute (reserved high)");
    stats.reserved = reserved;
    stats.peak_reserved = peak;
    return stats;
  }

  void ResetPeaks() override {
    uint64_t zero = 0;
    CudaCheck(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReservedMemHigh, &zero),
              "cudaMemPoolSetAttribute (reset reserved high)");
    MutexLock lock(&mu_);
    counters_.ResetPeaks();
  }

  // Frees are ordered on their users' streams: only memory whose free the
  // GPU has reached can go back, hence the device sync.
  void ReleaseCached() override {
    int previous = 0;
    CudaCheck(cudaGetDevice(&previous), "cudaGetDevice");
    CudaCheck(cudaSetDevice(device()), "cudaSetDevice");
    const cudaError_t synced = cudaDeviceSynchronize();
    CudaCheck(cudaSetDevice(previous), "cudaSetDevice (restore)");
    CudaCheck(synced, "cudaDeviceSynchronize (release cached)");
    CudaCheck(cudaMemPoolTrimTo(pool_, 0), "cudaMemPoolTrimTo");
  }

 private:
  Block Take(std::size_t bytes, void* stream) override {
    auto* on = stream != nullptr ? static_cast<cudaStream_t>(stream) : stream_;
    void* data = nullptr;
    cudaError_t status = cudaMallocFromPoolAsync(&data, bytes, pool_, on);
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      ReleaseCached();
      status = cudaMallocFromPoolAsync(&data, bytes, pool_, on);
    }
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      throw OutOfMemory(fmt::format(
          "[device storage on gpu({}), stream-ordered] out of memory: asked for {} bytes; {}",
          device(), bytes, Stats().ToString()));
    }
    CudaCheck(status, "cudaMallocFromPoolAsync");
    Block block{data, bytes, {}};
    if (stream == nullptr) block.pending = RecordFences({stream_});
    MutexLock lock(&mu_);
    counters_.HandOut(bytes);
    return block;
  }

  void Give(Block block) override {
    void* on = block.pending.size() == 1 ? block.pending.front().stream : stream_;
    OrderAfter(block.pending, on);
    CudaCheck(cudaFreeAsync(block.data, static_cast<cudaStream_t>(on)), "cudaFreeAsync");
    MutexLock lock(&mu_);
    counters_.TakeBack(block.capacity);
  }

  cudaMemPool_t pool_ = nullptr;
  cudaStream_t stream_ = nullptr;
  mutable Mutex mu_;
  MemoryCounters counters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<StorageManager> MakeCudaAsyncPool(int device) {
  return std::make_unique<CudaAsyncPool>(device);
}

}  // namespace ember::storage::internal
