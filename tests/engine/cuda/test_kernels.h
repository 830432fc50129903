#pragma once

// Tiny kernels for the GPU sync tests: each spins on the GPU clock for a
// while (so that a missing wait shows as a wrong value), then touches one int.

#include <cuda_runtime_api.h>

namespace ember::engine::testing {

// After `delay_us`, *dst = value.
void LaunchDelayedStore(cudaStream_t stream, int* dst, int value, int delay_us);
// After `delay_us`, *dst = *src.
void LaunchDelayedCopy(cudaStream_t stream, const int* src, int* dst, int delay_us);
// After `delay_us`: counts an error if *counter != expected, then sets
// *counter = expected + 1. A chain of these checks its own order.
void LaunchCheckedIncrement(cudaStream_t stream, int* counter, int expected, int* errors,
                            int delay_us);

}  // namespace ember::engine::testing
