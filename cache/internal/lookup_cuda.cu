// RelookupCuda and LookupCuda (cache_kernels.h): RelookupCpu's and
// LookupCpu's semantics (cache_cpu.cc) on one stream.
//
// Relookup releases the locks its batch's prefetch took (the slots it
// listed, each once, so a plain decrement suffices), then looks every index
// up again, a warp reading a row's 32 tags in one load. Its batch passed
// the prefetch's check, so it checks nothing: an entry out of range (only
// a batch changed since) gets kMiss and reads nothing out of bounds.
// Lookup (inference) checks its batch first, as the CPU does, and changes
// nothing for a bad one.

#include <cuda_runtime_api.h>

#include "cache/internal/cache_cuda.cuh"
#include "cache/internal/cache_kernels.h"
#include "engine/cuda/check.h"
#include "engine/cuda/scoped_device.h"
#include "storage/storage.h"

namespace ember::cache::internal {

using namespace cuda;  // NOLINT(build/namespaces): the helpers of cache_cuda.cuh

namespace {

__global__ void __launch_bounds__(kBlockThreads)
    UnlockKernel(const CacheArgs cache, const LocationArgs where) {
  AwaitPreviousKernel();
  const auto locked = static_cast<int64_t>(*where.num_locked);
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < locked; i += stride) {
    cache.locks[where.locked[i]] -= 1;
  }
}

// Every index's slot or kMiss; the locked list emptied. `fault_key`: null,
// or the batch check's verdict (for a bad batch, described into `fault`
// and nothing written).
__global__ void __launch_bounds__(kBlockThreads)
    LocateKernel(const CacheArgs cache, const BatchArgs batch, const LocationArgs where,
                 const unsigned long long* fault_key, BatchFault* fault) {
  AwaitPreviousKernel();
  if (fault_key != nullptr && *fault_key != kNoFaultKey) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
      DescribeFault(batch, cache.num_tables, cache.rows, *fault_key, fault);
    }
    return;
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) *where.num_locked = 0;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  // Whole warps go round the loop together (WarpFindSlot takes the warp).
  for (int64_t base = int64_t{blockIdx.x} * blockDim.x; base < batch.num_indices; base += stride) {
    const int64_t k = base + threadIdx.x;
    const bool in_batch = k < batch.num_indices;
    const TableSpan span =
        BlockTableSpan(batch, cache.num_tables, base, blockDim.x, batch.num_indices);
    const int64_t row = in_batch ? LinearIdOf(cache, batch, span, k) : -1;
    const int64_t slot = WarpFindSlot(cache, row, row >= 0);
    if (in_batch) where.slot_of[k] = static_cast<int32_t>(slot >= 0 ? slot : kMiss);
  }
}

unsigned LocateGrid(int64_t num_indices) { return GridFor(num_indices, kBlockThreads, 8192); }

}  // namespace

void RelookupCuda(const CacheArgs& cache, const BatchArgs& batch, const LocationArgs& where,
                  int device, void* stream) {
  static constexpr char kOp[] = "CachedTbe::Relookup";
  const ScopedDevice on_device(device);
  const cudaStream_t s = AsStream(stream);
  // A batch locks at most one slot per index.
  LaunchChained("UnlockKernel", kOp, UnlockKernel, GridFor(batch.num_indices, kBlockThreads, 8192),
                kBlockThreads, s, cache, where);
  LaunchChained("LocateKernel", kOp, LocateKernel, LocateGrid(batch.num_indices), kBlockThreads, s,
                cache, batch, where, nullptr, nullptr);
}

void LookupCuda(const CacheArgs& cache, const BatchArgs& batch, const LocationArgs& where,
                BatchFault* fault, int device, void* stream) {
  static constexpr char kOp[] = "CachedTbe::LookupForInference";
  const ScopedDevice on_device(device);
  const cudaStream_t s = AsStream(stream);
  // The check's key: 8 bytes of the device's pool, reused after this stream
  // has passed the kernels below.
  storage::Buffer key = storage::GetStorage(storage::MemoryKind::kDevice, device)
                            .Alloc(sizeof(unsigned long long), s);
  auto* fault_key = static_cast<unsigned long long*>(key.data());
  CheckBatchCuda(cache, batch, fault_key, kOp, s);
  LaunchChained("LocateKernel", kOp, LocateKernel, LocateGrid(batch.num_indices), kBlockThreads, s,
                cache, batch, where, fault_key, fault);
  key.RecordUse(s);
}

}  // namespace ember::cache::internal
