// CheckBatchCuda (cache_cuda.cuh): a batch's first bad offset or index, in
// the order in which the CPU's Linearize meets them, found on the GPU (the
// step's next kernel describes it: DescribeFault).
//
// One key orders every entry as Linearize checks it: offset j is key j
// (0 <= j <= T * B), index k is key T * B + 1 + k. A thread per entry
// takes atomicMin of the key of a bad one, so the smallest survives
// whatever the GPU's order. While the offsets are bad, an index's table may
// be found wrongly, but its key is above every offset's and cannot win.

#include <cuda_runtime_api.h>

#include "cache/internal/cache_cuda.cuh"
#include "engine/cuda/check.h"

namespace ember::cache::internal::cuda {
namespace {

__global__ void __launch_bounds__(kBlockThreads)
    FindFaultKernel(const BatchArgs batch, int num_tables, const int64_t* rows,
                    unsigned long long* key) {
  const int64_t bags = num_tables * batch.batch_size;
  const int64_t entries = bags + 1 + batch.num_indices;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < entries; i += stride) {
    bool bad;
    if (i <= bags) {
      bad = CheckOffset(batch, num_tables, i).kind != kNoFault;
    } else {
      const int64_t k = i - bags - 1;
      const int table = TableOfIndex(batch, num_tables, k);
      const int64_t index = IndexAt(batch, k);
      bad = index < 0 || index >= rows[table];
    }
    if (bad) atomicMin(key, static_cast<unsigned long long>(i));
  }
}

}  // namespace

void CheckBatchCuda(const CacheArgs& cache, const BatchArgs& batch, unsigned long long* key,
                    const char* op, cudaStream_t stream) {
  CudaCheckForOp(cudaMemsetAsync(key, 0xff, sizeof(*key), stream),
                 "cudaMemsetAsync of the fault key", op);
  const int64_t entries = cache.num_tables * batch.batch_size + 1 + batch.num_indices;
  FindFaultKernel<<<GridFor(entries, kBlockThreads), kBlockThreads, 0, stream>>>(
      batch, cache.num_tables, cache.rows, key);
  CudaCheckLaunch("FindFaultKernel", op);
}

}  // namespace ember::cache::internal::cuda
