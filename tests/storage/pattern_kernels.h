#pragma once

// Kernels for the storage tests: fill a buffer with one value, and count the
// elements that differ from it. A delay before each makes stale reuse show:
// a new owner that did not wait would overwrite data a slow check reads.

#include <cuda_runtime_api.h>

namespace ember::storage::testing {

// After `delay_us`, data[0..n) = value.
void LaunchFill(cudaStream_t stream, int* data, int n, int value, int delay_us);
// After `delay_us`, *errors += |{i : data[i] != value}|.
void LaunchCountMismatches(cudaStream_t stream, const int* data, int n, int value, int* errors,
                           int delay_us);

}  // namespace ember::storage::testing
