#include "tests/storage/pattern_kernels.h"

namespace ember::storage::testing {
namespace {

__device__ void SpinFor(int delay_us) {
  if (delay_us <= 0) return;
  const long long start = clock64();
  // ~1.7 GHz and up on the GPUs we run on: at least delay_us.
  const long long cycles = static_cast<long long>(delay_us) * 2000;
  while (clock64() - start < cycles) {
  }
}

__global__ void Fill(int* data, int n, int value, int delay_us) {
  if (threadIdx.x == 0) SpinFor(delay_us);
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    data[i] = value;
  }
}

__global__ void CountMismatches(const int* data, int n, int value, int* errors, int delay_us) {
  if (threadIdx.x == 0) SpinFor(delay_us);
  __syncthreads();
  int mine = 0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    mine += data[i] != value;
  }
  if (mine != 0) atomicAdd(errors, mine);
}

// One block per SM-ish: the delay is per block, so blocks run it together.
constexpr int kBlocks = 64;
constexpr int kThreads = 256;

}  // namespace

void LaunchFill(cudaStream_t stream, int* data, int n, int value, int delay_us) {
  Fill<<<kBlocks, kThreads, 0, stream>>>(data, n, value, delay_us);
}

void LaunchCountMismatches(cudaStream_t stream, const int* data, int n, int value, int* errors,
                           int delay_us) {
  CountMismatches<<<kBlocks, kThreads, 0, stream>>>(data, n, value, errors, delay_us);
}

}  // namespace ember::storage::testing
