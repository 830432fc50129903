#pragma once

// Launch helpers for the CUDA kernels: grid sizes for grid-stride loops and
// the stream of a RunContext. Launches and runtime calls are checked with
// the base layer's CudaCheckForOp / CudaCheckLaunch (engine/cuda/check.h).
//
// Thread safety: pure functions.

#include <algorithm>
#include <cstdint>
#include <limits>

#include <cuda_runtime_api.h>

#include "engine/cuda/check.h"

namespace ember::ops::internal {

inline constexpr int kBlockThreads = 256;

// Blocks for a grid-stride loop over n items, `per_block` a block: enough
// to fill the GPU, capped (the loop covers the rest).
inline unsigned GridFor(int64_t n, int64_t per_block = kBlockThreads) {
  const int64_t blocks = (n + per_block - 1) / per_block;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, 65536));
}

// Calls launch(int32_t{}) when every index a kernel forms stays at or below
// `largest`, and that fits in 32 bits; else launch(int64_t{}). 32-bit index
// arithmetic takes fewer registers and instructions than 64-bit, which the
// memory-bound kernels' address math feels.
template <typename Launch>
void WithIndexType(int64_t largest, Launch&& launch) {
  if (largest <= std::numeric_limits<int32_t>::max()) {
    launch(int32_t{});
  } else {
    launch(int64_t{});
  }
}

inline cudaStream_t AsStream(void* stream) { return static_cast<cudaStream_t>(stream); }

}  // namespace ember::ops::internal
