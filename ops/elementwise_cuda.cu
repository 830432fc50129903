// The CUDA elementwise kernel (see ops/internal/elementwise_kernels.h):
// grid-stride loops over PointwiseAt, the math the CPU kernel runs too;
// BiasGrad as a column reduction; Copy as one cudaMemcpyAsync.

#include "ops/internal/cuda_launch.cuh"
#include "ops/internal/elementwise_kernels.h"

namespace ember::ops::internal {
namespace {

// Each thread computes kItems elements, a grid's width apart, before it
// stores any: their loads are in flight together (in place is safe, each
// element reads only its own index before its store).
constexpr int kItems = 4;

template <ElementwiseOp kOp, typename Index>
__global__ void PointwiseKernel(ElementwiseArgs args) {
  const auto n = static_cast<Index>(args.n);
  const auto stride = static_cast<Index>(gridDim.x * blockDim.x);
  for (auto i = static_cast<Index>(blockIdx.x * blockDim.x + threadIdx.x); i < n;
       i += kItems * stride) {
    float values[kItems];
#pragma unroll
    for (int e = 0; e < kItems; ++e) {
      if (i + e * stride < n) values[e] = PointwiseAt<kOp, Index>(args, i + e * stride);
    }
#pragma unroll
    for (int e = 0; e < kItems; ++e) {
      if (i + e * stride < n) args.out[i + e * stride] = values[e];
    }
  }
}

// A block sums 8 columns: its 8 x 128 threads walk the rows 128 apart (a
// warp reads 4 rows' 8 adjacent floats, a 32-byte sector each), then the
// 128 partial sums of each column are added in shared memory in a fixed
// order, so the result is the same on every run. Doubles, as the CPU
// kernel sums. Narrow blocks because the matrices are tall: a 8192 x 64
// gradient is 8 blocks of 64 rows a thread (32 x 8 blocks, 2 of them
// walking 1024 rows a thread, took ~100 us on an H100).
constexpr int kBiasCols = 8;
constexpr int kBiasRows = 128;

__global__ void BiasGradKernel(ElementwiseArgs args) {
  __shared__ double partial[kBiasRows][kBiasCols];
  const int64_t col = int64_t{blockIdx.x} * kBiasCols + threadIdx.x;
  const int64_t rows = args.n / args.cols;
  double sum = 0.0;
  if (col < args.cols) {
    for (int64_t r = threadIdx.y; r < rows; r += kBiasRows) sum += args.a[r * args.cols + col];
  }
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y != 0 || col >= args.cols) return;
  for (int r = 1; r < kBiasRows; ++r) sum += partial[r][threadIdx.x];
  args.out[col] = static_cast<float>(sum);
}

}  // namespace

void ElementwiseCuda(const ElementwiseArgs& args, void* stream, std::string_view op) {
  cudaStream_t cuda_stream = AsStream(stream);
  if (args.op == ElementwiseOp::kBiasGrad) {
    if (args.cols == 0) return;
    const unsigned blocks = static_cast<unsigned>((args.cols + kBiasCols - 1) / kBiasCols);
    BiasGradKernel<<<blocks, dim3(kBiasCols, kBiasRows), 0, cuda_stream>>>(args);
    return CudaCheckLaunch("BiasGradKernel", op);
  }
  if (args.n == 0) return;
  if (args.op == ElementwiseOp::kCopy) {
    return CudaCheckForOp(
        cudaMemcpyAsync(args.out, args.a, static_cast<size_t>(args.n) * sizeof(float),
                        cudaMemcpyDeviceToDevice, cuda_stream),
        "cudaMemcpyAsync", op);
  }
  VisitPointwise(args.op, [&](auto tag) {
    constexpr ElementwiseOp kOp = decltype(tag)::kValue;
    // A thread's index runs to n + kItems * stride, the stride at most
    // 2^16 blocks of 256.
    const unsigned grid = GridFor((args.n + kItems - 1) / kItems);
    WithIndexType(args.n + kItems * (int64_t{1} << 24), [&](auto index) {
      PointwiseKernel<kOp, decltype(index)><<<grid, kBlockThreads, 0, cuda_stream>>>(args);
    });
  });
  CudaCheckLaunch("PointwiseKernel", op);
}

}  // namespace ember::ops::internal
