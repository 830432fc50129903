// RankOrderSum (rank_order_sum.h): one thread per element, the ranks'
// values added one after another, so every rank gets the same bits.

#include <cuda_runtime_api.h>

#include "engine/cuda/check.h"
#include "tools/train/dist/rank_order_sum.h"

namespace ember::train {
namespace {

constexpr int kThreads = 256;

__global__ void RankOrderSumKernel(const float* gathered, int ranks, int64_t n, float* out) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    float sum = gathered[i];
    for (int r = 1; r < ranks; ++r) sum = __fadd_rn(sum, gathered[r * n + i]);
    out[i] = sum;
  }
}

}  // namespace

void RankOrderSum(const float* gathered, int ranks, int64_t n, float* out, void* stream) {
  if (n == 0) return;
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  const int grid = static_cast<int>(blocks < 4096 ? blocks : 4096);
  RankOrderSumKernel<<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(gathered, ranks, n,
                                                                               out);
  CudaCheck(cudaGetLastError(), "RankOrderSumKernel launch");
}

}  // namespace ember::train
