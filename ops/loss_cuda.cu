// The CUDA loss kernels (see ops/internal/loss_kernels.h). The gradient is
// elementwise (grid-stride); the mean loss is one block's reduction in
// double, in a fixed order, so it is the same on every run.

#include "ops/internal/cuda_launch.cuh"
#include "ops/internal/loss_kernels.h"

namespace ember::ops::internal {
namespace {

constexpr int kReduceThreads = 1024;

__global__ void BceGradKernel(LossArgs args) {
  const auto n = static_cast<float>(args.mean_over);
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < args.n; i += stride) {
    args.grad_logits[i] = SigmoidMinusLabel(args.logits[i], args.labels[i]) / n;
  }
}

__global__ void BceLossKernel(LossArgs args) {
  __shared__ double partial[kReduceThreads];
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < args.n; i += kReduceThreads) {
    sum += BceTerm(args.logits[i], args.labels[i]);
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = kReduceThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    args.loss[0] = static_cast<float>(partial[0] / static_cast<double>(args.mean_over));
}

__global__ void SigmoidKernel(LossArgs args) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < args.n; i += stride) {
    args.probs[i] = StableSigmoid(args.logits[i]);
  }
}

}  // namespace

void BceCuda(const LossArgs& args, void* stream, std::string_view op) {
  BceGradKernel<<<GridFor(args.n), kBlockThreads, 0, AsStream(stream)>>>(args);
  CudaCheckLaunch("BceGradKernel", op);
  BceLossKernel<<<1, kReduceThreads, 0, AsStream(stream)>>>(args);
  CudaCheckLaunch("BceLossKernel", op);
}

void SigmoidCuda(const LossArgs& args, void* stream, std::string_view op) {
  if (args.n == 0) return;
  SigmoidKernel<<<GridFor(args.n), kBlockThreads, 0, AsStream(stream)>>>(args);
  CudaCheckLaunch("SigmoidKernel", op);
}

}  // namespace ember::ops::internal
