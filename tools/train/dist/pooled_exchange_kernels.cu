// PooledExchange's kernels (pooled_exchange_kernels.h): one thread per
// element written (per four, where the plan allows: the By4 kernels),
// reading a column plan of a few thousand entries that stays in L1/L2.
// Both are a pass over B_l x W floats, memory-bound.

#include <cstdint>

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

// The same kernels four columns a thread, for plans whose columns come in
// fours that stay together in both layouts (every table's dim a multiple
// of 4: DeviceColumnPlan::by_four) and 16-byte aligned buffers: one
// vector load and store per four columns, and the plan read once for
// them, where the one-column kernels spend most of their time on the plan
// and on index arithmetic.
__device__ float4 Load4(const float* at) { return *reinterpret_cast<const float4*>(at); }
__device__ void Store4(float* at, float4 v) { *reinterpret_cast<float4*>(at) = v; }

__global__ void UnpackPooledBy4Kernel(DeviceColumnPlan plan, const float* received, float* out) {
  const int64_t per_row = plan.total_dim / 4;
  const int64_t n = plan.local_batch * per_row;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t q = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; q < n; q += stride) {
    const int64_t b = q / per_row;
    const auto c = static_cast<int32_t>((q - b * per_row) * 4);
    const int32_t begin = plan.sources_begin[c];
    const int32_t end = plan.sources_begin[c + 1];
    float4 sum = Load4(received + BlockIndex(plan, b, plan.sources[begin]));
    for (int32_t k = begin + 1; k < end; ++k) {
      const float4 v = Load4(received + BlockIndex(plan, b, plan.sources[k]));
      sum = {__fadd_rn(sum.x, v.x), __fadd_rn(sum.y, v.y), __fadd_rn(sum.z, v.z),
             __fadd_rn(sum.w, v.w)};
    }
    Store4(out + b * plan.total_dim + c, sum);
  }
}

__global__ void PackGradsBy4Kernel(DeviceColumnPlan plan, const float* grads, float* send) {
  const int64_t n = plan.local_batch * plan.columns / 4;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t q = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; q < n; q += stride) {
    const int64_t i = q * 4;
    int p = 0;
    while (plan.local_batch * plan.first_column[p + 1] <= i) ++p;
    const int64_t first = plan.first_column[p];
    const int64_t width = plan.first_column[p + 1] - first;
    const int64_t rest = i - plan.local_batch * first;
    const int64_t b = rest / width;
    const int64_t w = first + (rest - b * width);
    Store4(send + i, Load4(grads + b * plan.total_dim + plan.out_column[w]));
  }
}

bool Aligned16(const float* a, const float* b) {
  return reinterpret_cast<uintptr_t>(a) % 16 == 0 && reinterpret_cast<uintptr_t>(b) % 16 == 0;
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
  const auto s = static_cast<cudaStream_t>(stream);
  if (plan.by_four && Aligned16(received, out)) {
    UnpackPooledBy4Kernel<<<Grid(n / 4), kThreads, 0, s>>>(plan, received, out);
    CudaCheck(cudaGetLastError(), "UnpackPooledBy4Kernel launch");
    return;
  }
  UnpackPooledKernel<<<Grid(n), kThreads, 0, s>>>(plan, received, out);
  CudaCheck(cudaGetLastError(), "UnpackPooledKernel launch");
}

void LaunchPackGrads(const DeviceColumnPlan& plan, const float* grads, float* send, void* stream) {
  const int64_t n = plan.local_batch * plan.columns;
  if (n == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  if (plan.by_four && Aligned16(grads, send)) {
    PackGradsBy4Kernel<<<Grid(n / 4), kThreads, 0, s>>>(plan, grads, send);
    CudaCheck(cudaGetLastError(), "PackGradsBy4Kernel launch");
    return;
  }
  PackGradsKernel<<<Grid(n), kThreads, 0, s>>>(plan, grads, send);
  CudaCheck(cudaGetLastError(), "PackGradsKernel launch");
}

}  // namespace ember::train
