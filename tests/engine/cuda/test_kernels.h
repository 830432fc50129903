#pragma once

// Tiny kernels for the GPU sync tests: each spins on the GPU clock for a
// while (so that a missing wait shows as a wrong value), then touches one int.

#include <cstdint>

#include <cuda_runtime_api.h>

namespace ember::engine::testing {

// After `delay_us`, *dst = value.
void LaunchDelayedStore(cudaStream_t stream, int* dst, int value, int delay_us);
// Spins `delay_us`, then stores the GPU's global timer (ns) at its start
// and end in begin_end[0] and begin_end[1]: when a kernel really ran, read
// from the device's own clock.
void LaunchTimedSpin(cudaStream_t stream, uint64_t* begin_end, int delay_us);
// After `delay_us`, *dst = *src.
void LaunchDelayedCopy(cudaStream_t stream, const int* src, int* dst, int delay_us);
// After `delay_us`: counts an error if *counter != expected, then sets
// *counter = expected + 1. A chain of these checks its own order.
void LaunchCheckedIncrement(cudaStream_t stream, int* counter, int expected, int* errors,
                            int delay_us);

// One op of the random workload on the GPU: the same function as
// testing::ApplyOp, data[write] = Mix(id, data[reads]...), after `delay_us`.
struct DeviceOp {
  static constexpr int kMaxReads = 24;
  uint32_t id = 0;
  int num_reads = 0;
  int reads[kMaxReads] = {};
  int write = 0;
  int delay_us = 0;
};
void LaunchApply(cudaStream_t stream, uint64_t* data, const DeviceOp& op);
// A launch that always fails (too many threads per block).
void LaunchInvalid(cudaStream_t stream);

}  // namespace ember::engine::testing
