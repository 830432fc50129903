// PooledExchange's kernels (pooled_exchange_kernels.h): one thread per
// element written, reading a column plan of a few thousand entries that
// stays in L1/L2. Both are a pass over B_l x W floats, memory-bound.

#include <cuda_runtime_api.h>

#include "engine/cuda/check.h"
#include "tools/train/dist/pooled_exchange_kernels.h"

namespace ember::train {
namespace {

constexpr int kThreads = 256;

// Where exchanged column w of example b sits in the owners' blocks.
__device__ int64_t BlockIndex(const DeviceColumnPlan& plan, int64_t b, int32_t w) {
  const int32_t p = plan.owner[w];
  const int32_t first = plan.first_column[p];
  const int32_t width = plan.first_column[p + 1] - first;
  return plan.local_batch * first + b * width + (w - first);
}

__global__ void UnpackPooledKernel(DeviceColumnPlan plan, const float* received, float* out) {
  const int64_t n = plan.local_batch * plan.total_dim;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t b = i / plan.total_dim;
    const auto c = static_cast<int32_t>(i - b * plan.total_dim);
    const int32_t begin = plan.sources_begin[c];
    const int32_t end = plan.sources_begin[c + 1];
    float sum = received[BlockIndex(plan, b, plan.sources[begin])];
    for (int32_t k = begin + 1; k < end; ++k) {
      sum = __fadd_rn(sum, received[BlockIndex(plan, b, plan.sources[k])]);
    }
    out[i] = sum;
  }
}

__global__ void PackGradsKernel(DeviceColumnPlan plan, const float* grads, float* send) {
  const int64_t n = plan.local_batch * plan.columns;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    int p = 0;
    while (plan.local_batch * plan.first_column[p + 1] <= i) ++p;
    const int64_t first = plan.first_column[p];
    const int64_t width = plan.first_column[p + 1] - first;
    const int64_t rest = i - plan.local_batch * first;
    const int64_t b = rest / width;
    const int64_t w = first + (rest - b * width);
    send[i] = grads[b * plan.total_dim + plan.out_column[w]];
  }
}

int Grid(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 8192 ? blocks : 8192);
}

}  // namespace

void LaunchUnpackPooled(const DeviceColumnPlan& plan, const float* received, float* out,
                        void* stream) {
  const int64_t n = plan.local_batch * plan.total_dim;
  if (n == 0) return;
  UnpackPooledKernel<<<Grid(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(plan, received,
                                                                                  out);
  CudaCheck(cudaGetLastError(), "UnpackPooledKernel launch");
}

void LaunchPackGrads(const DeviceColumnPlan& plan, const float* grads, float* send, void* stream) {
  const int64_t n = plan.local_batch * plan.columns;
  if (n == 0) return;
  PackGradsKernel<<<Grid(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(plan, grads, send);
  CudaCheck(cudaGetLastError(), "PackGradsKernel launch");
}

}  // namespace ember::train
