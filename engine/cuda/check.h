#pragma once

// CudaCheck: the one way Ember checks a CUDA runtime call, in .cc and .cu
// files alike. A function, not a macro: the call is evaluated once (by the
// caller, as the argument), and a failure's message says what the call was
// for, the op it served, the CUDA error and where:
//   [cudaStreamWaitEvent of op 'fc1'] cudaErrorInvalidResourceHandle
//   (invalid resource handle) at engine/internal/cuda/sync_stream.cc:40
// CudaLogIfError is its twin for destructors and other no-throw paths.
//
// For CUDA code only: this header includes cuda_runtime_api.h (the CUDA-free
// headers of every layer never do). The place of the call comes from
// __builtin_FILE/__builtin_LINE as default arguments, which GCC, Clang and
// nvcc all take in C++17 too (.cu files are compiled as C++17), where
// std::source_location is not available.
//
// Thread safety: thread-safe. A failed check clears the calling thread's
// sticky CUDA error (cudaGetLastError), so later checks report their own.

#include <string_view>

#include <cuda_runtime_api.h>

namespace ember {

// Where a check was written.
struct SourcePlace {
  const char* file;
  int line;
  static constexpr SourcePlace Here(const char* file = __builtin_FILE(),
                                    int line = __builtin_LINE()) {
    return {file, line};
  }
};

// Throws ember::CudaError; built out of line so a passing check costs one
// comparison.
[[noreturn]] void ThrowCudaError(cudaError_t status, std::string_view what, std::string_view op,
                                 SourcePlace where);

// Throws ember::CudaError "[what] ..." unless `status` is cudaSuccess.
inline void CudaCheck(cudaError_t status, std::string_view what,
                      SourcePlace where = SourcePlace::Here()) {
  if (status != cudaSuccess) ThrowCudaError(status, what, {}, where);
}

// The same for a call made on behalf of an op: "[what of op 'name'] ...".
inline void CudaCheckForOp(cudaError_t status, std::string_view what, std::string_view op,
                           SourcePlace where = SourcePlace::Here()) {
  if (status != cudaSuccess) ThrowCudaError(status, what, op, where);
}

// Throws CudaError when the last launch of `kernel` (for `op`) failed.
inline void CudaCheckLaunch(std::string_view kernel, std::string_view op,
                            SourcePlace where = SourcePlace::Here()) {
  CudaCheckForOp(cudaGetLastError(), kernel, op, where);
}

// Logs (as an error) instead of throwing; returns whether `status` succeeded.
bool CudaLogIfError(cudaError_t status, std::string_view what,
                    SourcePlace where = SourcePlace::Here());

}  // namespace ember
