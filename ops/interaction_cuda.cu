// The CUDA dot-interaction kernels (see ops/internal/interaction_kernels.h).
//
// Where a sample's features fit in shared memory (F x D floats up to 48 KiB:
// DLRM's 27 x 64 is 7 KiB), a block takes a sample at a time: it stages the
// sample once, then forward gives each thread whole pairs (a dot over D from
// shared memory), and backward each thread a column of eight rows of
// grad_input (below, BackwardSharedKernel). A sample's F x D inputs are read from
// global memory once instead of once per pair, and no index is divided by
// 64-bit arithmetic in the inner loops: 27 x 64 at batch 8192 went from
// 650/755 us (forward/backward) to 78/89 us on an H100, measured by ncu
// inside the training step (docs/benchmarks.md, "Less GPU work a step").
//
// Larger samples fall back to kernels that read global memory directly:
// forward one warp per (sample, pair), its lanes striding over D, then a
// shuffle reduction; backward one thread per element of grad_input. Either
// way nothing is written twice and no atomics are needed, so results are
// the same run to run.

#include <algorithm>
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

// Shared-memory kernels: one sample per block at a time. Forward pads each
// staged row to D + 1 floats: a warp's threads read different rows j at
// one column, and the pad puts them on different banks.
constexpr int kSharedLimitBytes = 48 * 1024;

int64_t ForwardSharedBytes(const InteractionArgs& a) {
  return a.features * (a.dim + 1) * int64_t{sizeof(float)};
}

unsigned SampleGrid(int64_t batch) {
  return static_cast<unsigned>(std::min<int64_t>(batch, int64_t{1} << 16));
}

__global__ void ForwardSharedKernel(InteractionArgs args) {
  extern __shared__ float staged[];  // [F][D + 1]
  const int f = static_cast<int>(args.features);
  const int d = static_cast<int>(args.dim);
  const int ld = d + 1;
  const int pairs = static_cast<int>(NumPairs(f));
  for (int64_t b = blockIdx.x; b < args.batch; b += gridDim.x) {
    const float* x = args.input + b * f * d;
    for (int k = threadIdx.x; k < f * d; k += blockDim.x) staged[k / d * ld + k % d] = x[k];
    __syncthreads();
    for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
      int64_t i = 0;
      int64_t j = 0;
      PairAt(p, &i, &j);
      const float* xi = staged + i * ld;
      const float* xj = staged + j * ld;
      float dot = 0.0f;
      for (int e = 0; e < d; ++e) dot += xi[e] * xj[e];
      args.output[b * pairs + p] = dot;
    }
    __syncthreads();  // before the next sample overwrites `staged`
  }
}

// Backward computes grad_input[b] = S X[b], S the symmetric F x F matrix
// of the sample's pair gradients (zero diagonal). The block stages X and S
// transposed (S[k][m] at m * R + k, R = F rounded up to 8, zeros past F),
// then each thread takes one column e and eight rows k: per m it reads
// X[m][e] once and S[k..k+7][m] as two float4 (the same for the whole
// warp, a broadcast), eight FMAs for three shared loads. A thread per
// element summing over m instead (two shared loads an FMA, plus the pair
// index) took 382 us for DLRM's 8192 x 27 x 64 on an H200.
constexpr int kBackwardRows = 8;

__host__ __device__ int64_t PaddedFeatures(int64_t features) {
  return (features + kBackwardRows - 1) / kBackwardRows * kBackwardRows;
}

int64_t BackwardSharedBytes(const InteractionArgs& a) {
  return (a.features * PaddedFeatures(a.features) + a.features * a.dim) * int64_t{sizeof(float)};
}

__global__ void BackwardSharedKernel(InteractionArgs args) {
  extern __shared__ float4 shared4[];  // S^T [F][R], then X [F][D]
  const int f = static_cast<int>(args.features);
  const int d = static_cast<int>(args.dim);
  const auto r = static_cast<int>(PaddedFeatures(f));
  const int pairs = static_cast<int>(NumPairs(f));
  auto* s_t = reinterpret_cast<float*>(shared4);
  float* staged = s_t + f * r;
  const int items = r / kBackwardRows * d;  // (row group, column)
  for (int64_t b = blockIdx.x; b < args.batch; b += gridDim.x) {
    const float* x = args.input + b * f * d;
    const float* dz = args.grad_output + b * pairs;
    for (int q = threadIdx.x; q < f * d; q += blockDim.x) staged[q] = x[q];
    for (int q = threadIdx.x; q < f * r; q += blockDim.x) {
      const int m = q / r;
      const int k = q % r;
      s_t[q] = k >= f || k == m ? 0.0f : dz[k > m ? PairIndex(k, m) : PairIndex(m, k)];
    }
    __syncthreads();
    for (int item = threadIdx.x; item < items; item += blockDim.x) {
      const int k0 = item / d * kBackwardRows;
      const int e = item % d;
      float acc[kBackwardRows] = {};
      for (int m = 0; m < f; ++m) {
        const float xm = staged[m * d + e];
        const float4 lo = shared4[(m * r + k0) / 4];
        const float4 hi = shared4[(m * r + k0) / 4 + 1];
        acc[0] += lo.x * xm, acc[1] += lo.y * xm, acc[2] += lo.z * xm, acc[3] += lo.w * xm;
        acc[4] += hi.x * xm, acc[5] += hi.y * xm, acc[6] += hi.z * xm, acc[7] += hi.w * xm;
      }
      float* out = args.grad_input + b * f * d + int64_t{k0} * d + e;
#pragma unroll
      for (int j = 0; j < kBackwardRows; ++j) {
        if (k0 + j < f) out[int64_t{j} * d] = acc[j];
      }
    }
    __syncthreads();  // before the next sample overwrites the staged data
  }
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
  if (const int64_t bytes = ForwardSharedBytes(args); bytes <= kSharedLimitBytes) {
    ForwardSharedKernel<<<SampleGrid(args.batch), kBlockThreads, static_cast<size_t>(bytes),
                          AsStream(stream)>>>(args);
    return CudaCheckLaunch("InteractionForwardSharedKernel", op);
  }
  // Each warp is whole (the grid-stride loop keeps all lanes of a warp
  // together), as the full-mask shuffle requires.
  ForwardKernel<<<GridFor(warps * kWarp), kBlockThreads, 0, AsStream(stream)>>>(args);
  CudaCheckLaunch("InteractionForwardKernel", op);
}

void InteractionBackwardCuda(const InteractionArgs& args, void* stream, std::string_view op) {
  const int64_t n = args.batch * args.features * args.dim;
  if (n == 0) return;
  if (const int64_t bytes = BackwardSharedBytes(args); bytes <= kSharedLimitBytes) {
    BackwardSharedKernel<<<SampleGrid(args.batch), kBlockThreads, static_cast<size_t>(bytes),
                           AsStream(stream)>>>(args);
    return CudaCheckLaunch("InteractionBackwardSharedKernel", op);
  }
  BackwardKernel<<<GridFor(n), kBlockThreads, 0, AsStream(stream)>>>(args);
  CudaCheckLaunch("InteractionBackwardKernel", op);
}

}  // namespace ember::ops::internal
