#pragma once

// Launch helpers for the dense CUDA kernels: grid sizes for grid-stride
// loops, and the checks of launches and runtime calls.
//
// Why not engine/internal/cuda/cuda_check.h: .cu files compile as C++17
// (CMake 3.25 cannot ask nvcc for C++20) and that header needs C++20's
// std::source_location. CheckCuda throws the same CudaError with the same
// message, "[cudaMemcpyAsync of op 'Copy'] cudaErrorInvalidValue (invalid
// argument) at ops/elementwise_cuda.cu:40", taking the place from GCC's
// __builtin_FILE/__builtin_LINE (what source_location is built on).
//
// Thread safety: pure functions (the checks read and clear the calling
// thread's CUDA error state).

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include <cuda_runtime_api.h>

#include "engine/error.h"

namespace ember::ops::internal {

inline constexpr int kBlockThreads = 256;

// Blocks for a grid-stride loop over n items, `per_block` a block: enough
// to fill the GPU, capped (the loop covers the rest).
inline unsigned GridFor(int64_t n, int64_t per_block = kBlockThreads) {
  const int64_t blocks = (n + per_block - 1) / per_block;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, 65536));
}

inline cudaStream_t AsStream(void* stream) { return static_cast<cudaStream_t>(stream); }

// Throws ember::CudaError unless `status` is cudaSuccess; clears the sticky
// error so that later checks report their own failures.
inline void CheckCuda(cudaError_t status, std::string_view what, std::string_view op,
                      const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  if (status == cudaSuccess) return;
  (void)cudaGetLastError();
  throw CudaError("[" + std::string(what) + " of op '" + std::string(op) + "'] " +
                  cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ") at " + file +
                  ":" + std::to_string(line));
}

// Throws CudaError when the launch of `kernel` for `op` failed.
inline void CheckLaunch(std::string_view kernel, std::string_view op,
                        const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  CheckCuda(cudaGetLastError(), kernel, op, file, line);
}

}  // namespace ember::ops::internal
