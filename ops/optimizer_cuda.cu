// The CUDA dense optimizer kernel (see ops/internal/optimizer_kernels.h):
// a grid-stride loop over UpdateAt, the update the CPU kernel runs too.

#include "ops/internal/cuda_launch.cuh"
#include "ops/internal/optimizer_kernels.h"

namespace ember::ops::internal {
namespace {

template <DenseOptimizer kKind>
__global__ void UpdateKernel(OptimizerArgs args) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < args.n; i += stride) {
    UpdateAt<kKind>(args, i);
  }
}

template <DenseOptimizer kKind>
void Launch(const OptimizerArgs& args, cudaStream_t stream) {
  UpdateKernel<kKind><<<GridFor(args.n), kBlockThreads, 0, stream>>>(args);
}

}  // namespace

void OptimizerCuda(const OptimizerArgs& args, void* stream, std::string_view op) {
  if (args.n == 0) return;
  switch (args.kind) {
    case DenseOptimizer::kSgd:
      Launch<DenseOptimizer::kSgd>(args, AsStream(stream));
      break;
    case DenseOptimizer::kAdagrad:
      Launch<DenseOptimizer::kAdagrad>(args, AsStream(stream));
      break;
    case DenseOptimizer::kAdam:
      Launch<DenseOptimizer::kAdam>(args, AsStream(stream));
      break;
  }
  CudaCheckLaunch("OptimizerUpdateKernel", op);
}

}  // namespace ember::ops::internal
