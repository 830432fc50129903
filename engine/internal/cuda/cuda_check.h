#pragma once

// CudaCheck: the one way Ember checks a CUDA runtime call. A function, not a
// macro: the call is evaluated once (by the caller, as the argument), and the
// failure's message says what the call was for, the CUDA error and where:
//   [cudaStreamWaitEvent for op 'fc1'] cudaErrorInvalidResourceHandle
//   (invalid resource handle) at engine/internal/cuda/stream_waits.cc:40
// CudaLogIfError is its twin for destructors and other no-throw paths.
//
// Thread safety: thread-safe.

#include <source_location>
#include <string_view>

#include <cuda_runtime_api.h>

namespace ember::engine::internal {

// Throws ember::CudaError when `status` is not cudaSuccess. The sticky error
// state of the runtime is cleared (cudaGetLastError) so that later checks
// report their own failures. Inline, so that success costs one comparison:
// the message is built only on failure.
[[noreturn]] void ThrowCudaError(cudaError_t status, std::string_view what, std::string_view op,
                                 std::source_location where);
inline void CudaCheck(cudaError_t status, std::string_view what,
                      std::source_location where = std::source_location::current()) {
  if (status != cudaSuccess) ThrowCudaError(status, what, {}, where);
}
// The same for a call made on behalf of an op: "[what of op 'name'] ...".
inline void CudaCheckForOp(cudaError_t status, std::string_view what, std::string_view op,
                           std::source_location where = std::source_location::current()) {
  if (status != cudaSuccess) ThrowCudaError(status, what, op, where);
}

// Logs (as an error) instead of throwing; returns whether `status` succeeded.
bool CudaLogIfError(cudaError_t status, std::string_view what,
                    std::source_location where = std::source_location::current());

// The number of CUDA devices, 0 when there is no driver or no device.
int CudaDeviceCount();

}  // namespace ember::engine::internal
