// The CUDA dot-interaction kernels (see ops/internal/interaction_kernels.h).
// Forward: one warp per (sample, pair), its lanes striding over the feature
// dimension, then a shuffle reduction. Backward: one thread per element of
// grad_input, summing over the other features, so nothing is written twice
// and no atomics are needed.

#include <cmath>

#include "ops/internal/cuda_launch.cuh"
#include "ops/internal/interaction_kernels.h"

namespace ember::ops::internal {
namespace {

constexpr int kWarp = 32;

// The pair (i, j), i > j, at column p: i is the largest with i(i-1)/2 <= p.
// The square root is a first guess that the loops correct.
__device__ void PairAt(int64_t p, int64_t* i, int64_t* j) {
  int64_t row = static_cast<int64_t>((1.0 + sqrt(1.0 + 8.0 * static_cast<double>(p))) / 2.0);
  while (PairIndex(row, 0) > p) --row;
  while (PairIndex(row + 1, 0) <= p) ++row;
  *i = row;
  *j = p - PairIndex(row, 0);
}

__global__ void ForwardKernel(InteractionArgs args) {
  const int64_t pairs = NumPairs(args.features);
  const int64_t warps = args.batch * pairs;
  const int lane = threadIdx.x % kWarp;
  const int64_t warp_stride = int64_t{gridDim.x} * blockDim.x / kWarp;
  for (int64_t w = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / kWarp; w < warps;
       w += warp_stride) {
    const int64_t b = w / pairs;
    int64_t i = 0;
    int64_t j = 0;
    PairAt(w % pairs, &i, &j);
    const float* x = args.input + b * args.features * args.dim;
    float dot = 0.0f;
    for (int64_t e = lane; e < args.dim; e += kWarp)
      dot += x[i * args.dim + e] * x[j * args.dim + e];
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
      dot += __shfl_down_sync(0xffffffffu, dot, offset);
    }
    if (lane == 0) args.output[w] = dot;
  }
}

__global__ void BackwardKernel(InteractionArgs args) {
  const int64_t f = args.features;
  const int64_t d = args.dim;
  const int64_t n = args.batch * f * d;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t idx = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; idx < n; idx += stride) {
    const int64_t b = idx / (f * d);
    const int64_t k = idx / d % f;
    const int64_t e = idx % d;
    const float* x = args.input + b * f * d;
    const float* dz = args.grad_output + b * NumPairs(f);
    float sum = 0.0f;
    for (int64_t m = 0; m < f; ++m) {
      if (m == k) continue;
      const float g = dz[m > k ? PairIndex(m, k) : PairIndex(k, m)];
      sum += g * x[m * d + e];
    }
    args.grad_input[idx] = sum;
  }
}

}  // namespace

void InteractionForwardCuda(const InteractionArgs& args, void* stream, std::string_view op) {
  const int64_t warps = args.batch * NumPairs(args.features);
  if (warps == 0) return;
  // Each warp is whole (the grid-stride loop keeps all lanes of a warp
  // together), as the full-mask shuffle requires.
  ForwardKernel<<<GridFor(warps * kWarp), kBlockThreads, 0, AsStream(stream)>>>(args);
  CudaCheckLaunch("InteractionForwardKernel", op);
}

void InteractionBackwardCuda(const InteractionArgs& args, void* stream, std::string_view op) {
  const int64_t n = args.batch * args.features * args.dim;
  if (n == 0) return;
  BackwardKernel<<<GridFor(n), kBlockThreads, 0, AsStream(stream)>>>(args);
  CudaCheckLaunch("InteractionBackwardKernel", op);
}

}  // namespace ember::ops::internal
