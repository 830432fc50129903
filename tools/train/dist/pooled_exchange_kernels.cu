// PooledExchange's kernels (pooled_exchange_kernels.h): one thread per
// element written (per four, where the plan allows: the float4 forms),
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

// A run of kWidth<V> columns moved as one: a float, or (the by-four plans)
// a float4, where one vector load and store and one read of the plan
// serve four columns; the one-column form spends most of its time on the
// plan and on index arithmetic.
template <typename V>
constexpr int kWidth = sizeof(V) / sizeof(float);

template <typename V>
__device__ V Load(const float* at) {
  return *reinterpret_cast<const V*>(at);
}

template <typename V>
__device__ void Store(float* at, V v) {
  *reinterpret_cast<V*>(at) = v;
}

__device__ float Add(float a, float b) { return __fadd_rn(a, b); }
__device__ float4 Add(float4 a, float4 b) {
  return {__fadd_rn(a.x, b.x), __fadd_rn(a.y, b.y), __fadd_rn(a.z, b.z), __fadd_rn(a.w, b.w)};
}

// Each output run: the sum, in plan order, of its sources' runs.
template <typename V>
__global__ void UnpackPooledKernel(DeviceColumnPlan plan, const float* received, float* out) {
  const int64_t per_row = plan.total_dim / kWidth<V>;
  const int64_t n = plan.local_batch * per_row;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t q = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; q < n; q += stride) {
    const int64_t b = q / per_row;
    const auto c = static_cast<int32_t>((q - b * per_row) * kWidth<V>);
    const int32_t begin = plan.sources_begin[c];
    const int32_t end = plan.sources_begin[c + 1];
    V sum = Load<V>(received + BlockIndex(plan, b, plan.sources[begin]));
    for (int32_t k = begin + 1; k < end; ++k) {
      sum = Add(sum, Load<V>(received + BlockIndex(plan, b, plan.sources[k])));
    }
    Store<V>(out + b * plan.total_dim + c, sum);
  }
}

// Each send run: the gradient run of its example and exchanged column,
// found from its place in the owners' blocks.
template <typename V>
__global__ void PackGradsKernel(DeviceColumnPlan plan, const float* grads, float* send) {
  const int64_t n = plan.local_batch * plan.columns / kWidth<V>;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t q = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; q < n; q += stride) {
    const int64_t i = q * kWidth<V>;
    int p = 0;
    while (plan.local_batch * plan.first_column[p + 1] <= i) ++p;
    const int64_t first = plan.first_column[p];
    const int64_t width = plan.first_column[p + 1] - first;
    const int64_t rest = i - plan.local_batch * first;
    const int64_t b = rest / width;
    const int64_t w = first + (rest - b * width);
    Store<V>(send + i, Load<V>(grads + b * plan.total_dim + plan.out_column[w]));
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
    UnpackPooledKernel<float4><<<Grid(n / 4), kThreads, 0, s>>>(plan, received, out);
    CudaCheck(cudaGetLastError(), "UnpackPooledKernel<float4> launch");
  } else {
    UnpackPooledKernel<float><<<Grid(n), kThreads, 0, s>>>(plan, received, out);
    CudaCheck(cudaGetLastError(), "UnpackPooledKernel<float> launch");
  }
}

void LaunchPackGrads(const DeviceColumnPlan& plan, const float* grads, float* send, void* stream) {
  const int64_t n = plan.local_batch * plan.columns;
  if (n == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  if (plan.by_four && Aligned16(grads, send)) {
    PackGradsKernel<float4><<<Grid(n / 4), kThreads, 0, s>>>(plan, grads, send);
    CudaCheck(cudaGetLastError(), "PackGradsKernel<float4> launch");
  } else {
    PackGradsKernel<float><<<Grid(n), kThreads, 0, s>>>(plan, grads, send);
    CudaCheck(cudaGetLastError(), "PackGradsKernel<float> launch");
  }
}

}  // namespace ember::train
