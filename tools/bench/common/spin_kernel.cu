#include "tools/bench/common/spin_kernel.h"

#include <cstdint>

namespace ember::bench {
namespace {

__device__ uint64_t GlobalTimerNs() {
  uint64_t now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  return now;
}

__global__ void SpinIncrement(int* counter, int spin_us) {
  if (spin_us > 0) {
    const uint64_t until = GlobalTimerNs() + static_cast<uint64_t>(spin_us) * 1000;
    while (GlobalTimerNs() < until) {
    }
  }
  // volatile: a plain read-modify-write is what must be ordered, so the
  // compiler must neither cache nor merge it.
  volatile int* value = counter;
  *value = *value + 1;
}

}  // namespace

void LaunchSpinIncrement(cudaStream_t stream, int* counter, int spin_us) {
  SpinIncrement<<<1, 1, 0, stream>>>(counter, spin_us);
}

}  // namespace ember::bench
