// CheckBatchCuda (cache_cuda.cuh): a batch's first bad offset or index, in
// the order in which the CPU's Linearize meets them, found on the GPU (the
// step's next kernel describes it: DescribeFault).
//
// One key orders every entry as Linearize checks it: offset j is key j
// (0 <= j <= T * B), index k is key T * B + 1 + k. Threads take atomicMin
// of the key of each bad entry, so the smallest survives whatever the
// GPU's order. While the offsets are bad, an index's table may
// be found wrongly, but its key is above every offset's and cannot win.

#include <cuda_runtime_api.h>

#include "cache/internal/cache_cuda.cuh"
#include "engine/cuda/check.h"

namespace ember::cache::internal::cuda {
namespace {

// Indices a thread checks at once: their loads go out together (one at a
// time, a thread's short life was mostly waiting for its one load).
constexpr int kChecksInFlight = 4;

__global__ void __launch_bounds__(kBlockThreads)
    FindFaultKernel(const BatchArgs batch, int num_tables, const int64_t* rows,
                    unsigned long long* key) {
  AwaitPreviousKernel();
  const int64_t bags = num_tables * batch.batch_size;
  const int64_t n = batch.num_indices;
  const int64_t threads = int64_t{gridDim.x} * blockDim.x;
  const int64_t thread = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  for (int64_t j = thread; j <= bags; j += threads) {
    if (CheckOffset(batch, num_tables, j).kind != kNoFault) {
      atomicMin(key, static_cast<unsigned long long>(j));
    }
  }
  // Each block checks tiles of consecutive indices, which span few tables.
  constexpr int64_t kTile = int64_t{kBlockThreads} * kChecksInFlight;
  for (int64_t tile = int64_t{blockIdx.x} * kTile; tile < n; tile += int64_t{gridDim.x} * kTile) {
    const TableSpan span = BlockTableSpan(batch, num_tables, tile, kTile, n);
    int64_t index[kChecksInFlight];
#pragma unroll
    for (int u = 0; u < kChecksInFlight; ++u) {
      const int64_t k = tile + u * kBlockThreads + threadIdx.x;
      index[u] = k < n ? IndexAt(batch, k) : 0;
    }
#pragma unroll
    for (int u = 0; u < kChecksInFlight; ++u) {
      const int64_t k = tile + u * kBlockThreads + threadIdx.x;
      if (k >= n) continue;
      const int table = TableOfIndex(batch, span, k);
      if (index[u] < 0 || index[u] >= rows[table]) {
        atomicMin(key, static_cast<unsigned long long>(bags + 1 + k));
      }
    }
  }
}

}  // namespace

void CheckBatchCuda(const CacheArgs& cache, const BatchArgs& batch, unsigned long long* key,
                    const char* op, cudaStream_t stream) {
  CudaCheckForOp(cudaMemsetAsync(key, 0xff, sizeof(*key), stream),
                 "cudaMemsetAsync of the fault key", op);
  const int64_t entries = cache.num_tables * batch.batch_size + 1 + batch.num_indices;
  LaunchChained("FindFaultKernel", op, FindFaultKernel,
                GridFor(entries, kBlockThreads * kChecksInFlight), kBlockThreads, stream, batch,
                cache.num_tables, cache.rows, key);
}

}  // namespace ember::cache::internal::cuda
