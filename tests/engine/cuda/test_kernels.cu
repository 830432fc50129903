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

__global__ void TimedSpin(uint64_t* begin_end, int delay_us) {
  const uint64_t begin = GlobalTimerNs();
  SpinFor(delay_us);
  volatile uint64_t* out = begin_end;
  out[0] = begin;
  out[1] = GlobalTimerNs();
}

__global__ void CheckedIncrement(int* counter, int expected, int* errors, int delay_us) {
  SpinFor(delay_us);
  volatile int* value = counter;
  if (*value != expected) atomicAdd(errors, 1);
  *value = expected + 1;
}

__device__ uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

__global__ void Apply(uint64_t* data, DeviceOp op) {
  SpinFor(op.delay_us);
  uint64_t acc = SplitMix(op.id);
  for (int k = 0; k < op.num_reads; ++k) acc = SplitMix(acc ^ (data[op.reads[k]] + k));
  data[op.write] = acc;
}

__global__ void Nothing() {}

}  // namespace

void LaunchApply(cudaStream_t stream, uint64_t* data, const DeviceOp& op) {
  Apply<<<1, 1, 0, stream>>>(data, op);
}

void LaunchInvalid(cudaStream_t stream) { Nothing<<<1, 4096, 0, stream>>>(); }

void LaunchDelayedStore(cudaStream_t stream, int* dst, int value, int delay_us) {
  DelayedStore<<<1, 1, 0, stream>>>(dst, value, delay_us);
}

void LaunchTimedSpin(cudaStream_t stream, uint64_t* begin_end, int delay_us) {
  TimedSpin<<<1, 1, 0, stream>>>(begin_end, delay_us);
}

void LaunchDelayedCopy(cudaStream_t stream, const int* src, int* dst, int delay_us) {
  DelayedCopy<<<1, 1, 0, stream>>>(src, dst, delay_us);
}

void LaunchCheckedIncrement(cudaStream_t stream, int* counter, int expected, int* errors,
                            int delay_us) {
  CheckedIncrement<<<1, 1, 0, stream>>>(counter, expected, errors, delay_us);
}

}  // namespace ember::engine::testing
