#pragma once

// Launch helpers for the CUDA kernels: grid sizes for grid-stride loops and
// the stream of a RunContext. Launches and runtime calls are checked with
// the base layer's CudaCheckForOp / CudaCheckLaunch (engine/cuda/check.h).
//
// Thread safety: pure functions.

#include <algorithm>
#include <cstdint>

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

inline cudaStream_t AsStream(void* stream) { return static_cast<cudaStream_t>(stream); }

}  // namespace ember::ops::internal
