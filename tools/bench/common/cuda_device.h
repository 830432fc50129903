#pragma once

// What every CUDA bench case shares (ember-bench-engine's GPU cases,
// ember-bench-storage, ember-bench-ops): the CUDA call check and the line
// that names the device the figures come from. Built only with CUDA; the
// benches' no-CUDA stubs do not need it.
//
// Thread safety: thread-safe.

#include <optional>
#include <string>

#include <cuda_runtime_api.h>

namespace ember::bench {

// Throws ember::CudaError "call: cudaErrorX (text)" when `status` is not
// cudaSuccess.
void CheckCuda(cudaError_t status, const char* call);

// Makes GPU 0 current and describes it (name, compute capability, memory,
// multiprocessors, CUDA runtime and driver versions); without a usable
// device, nullopt and the reason in `why`.
std::optional<std::string> DescribeDevice0(std::string* why);

}  // namespace ember::bench
