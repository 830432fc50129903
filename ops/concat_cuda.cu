// The CUDA column concatenation kernel (see ops/internal/concat_kernels.h):
// one thread per element of the whole, in a grid-stride loop; each finds
// its part among the few (at most kMaxConcatParts) by its column, so reads
// and writes of the whole are coalesced along a row.

#include "ops/internal/concat_kernels.h"
#include "ops/internal/cuda_launch.cuh"

namespace ember::ops::internal {
namespace {

__global__ void ConcatKernel(ConcatArgs args) {
  const int64_t n = args.rows * args.width;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t idx = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; idx < n; idx += stride) {
    const int64_t b = idx / args.width;
    const int64_t column = idx % args.width;
    int k = 0;
    while (k + 1 < args.num_parts && column >= args.part_offset[k + 1]) ++k;
    float* part = args.part[k] + b * args.part_width[k] + (column - args.part_offset[k]);
    if (args.direction == ConcatDirection::kToWhole) {
      args.whole[idx] = *part;
    } else {
      *part = args.whole[idx];
    }
  }
}

}  // namespace

void ConcatCuda(const ConcatArgs& args, void* stream, std::string_view op) {
  const int64_t n = args.rows * args.width;
  if (n == 0) return;
  ConcatKernel<<<GridFor(n), kBlockThreads, 0, AsStream(stream)>>>(args);
  CudaCheckLaunch("ConcatKernel", op);
}

}  // namespace ember::ops::internal
