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
// report their own failures.
void CudaCheck(cudaError_t status, std::string_view what,
               std::source_location where = std::source_location::current());

// Logs (as an error) instead of throwing; returns whether `status` succeeded.
bool CudaLogIfError(cudaError_t status, std::string_view what,
                    std::source_location where = std::source_location::current());

// The number of CUDA devices, 0 when there is no driver or no device.
int CudaDeviceCount();

}  // namespace ember::engine::internal
