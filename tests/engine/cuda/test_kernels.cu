#include "tests/engine/cuda/test_kernels.h"

#include <cstdint>

namespace ember::engine::testing {
namespace {

__device__ uint64_t GlobalTimerNs() {
  uint64_t now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  return now;
}

__device__ void SpinFor(int delay_us) {
  const uint64_t until = GlobalTimerNs() + static_cast<uint64_t>(delay_us) * 1000;
  while (GlobalTimerNs() < until) {
  }
}

__global__ void DelayedStore(int* dst, int value, int delay_us) {
  SpinFor(delay_us);
  *reinterpret_cast<volatile int*>(dst) = value;
}

__global__ void DelayedCopy(const int* src, int* dst, int delay_us) {
  SpinFor(delay_us);
  *reinterpret_cast<volatile int*>(dst) = *reinterpret_cast<const volatile int*>(src);
}

__global__ void CheckedIncrement(int* counter, int expected, int* errors, int delay_us) {
  SpinFor(delay_us);
  volatile int* value = counter;
  if (*value != expected) atomicAdd(errors, 1);
  *value = expected + 1;
}

}  // namespace

void LaunchDelayedStore(cudaStream_t stream, int* dst, int value, int delay_us) {
  DelayedStore<<<1, 1, 0, stream>>>(dst, value, delay_us);
}

void LaunchDelayedCopy(cudaStream_t stream, const int* src, int* dst, int delay_us) {
  DelayedCopy<<<1, 1, 0, stream>>>(src, dst, delay_us);
}

void LaunchCheckedIncrement(cudaStream_t stream, int* counter, int expected, int* errors,
                            int delay_us) {
  CheckedIncrement<<<1, 1, 0, stream>>>(counter, expected, errors, delay_us);
}

}  // namespace ember::engine::testing
