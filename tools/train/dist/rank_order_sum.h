#pragma once

// The kernel behind NcclCommunicator::AllReduceSum: out[i] = the sum over
// ranks r of gathered[r * n + i], added in rank order. Launches on
// `stream` (a cudaStream_t) and returns; throws CudaError if the launch
// fails.
//
// Thread safety: reentrant.

#include <cstdint>

namespace ember::train {

void RankOrderSum(const float* gathered, int ranks, int64_t n, float* out, void* stream);

}  // namespace ember::train
