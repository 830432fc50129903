#pragma once

// The dot-interaction kernels behind interaction.h, on one argument struct.
// The CPU kernels run to completion; the CUDA kernels launch on `stream` (a
// cudaStream_t) and return; a build without CUDA links stubs that throw
// Unavailable.
//
// Thread safety: reentrant (each call works on its own arguments).

#include <cstdint>
#include <string_view>

#include "ops/internal/host_device.h"

namespace ember::ops::internal {

struct InteractionArgs {
  int64_t batch = 0;                   // B
  int64_t features = 0;                // F
  int64_t dim = 0;                     // D
  const float* input = nullptr;        // [B, F, D]
  const float* grad_output = nullptr;  // backward: [B, F(F-1)/2]
  float* output = nullptr;             // forward: [B, F(F-1)/2]
  float* grad_input = nullptr;         // backward: [B, F, D]
};

EMBER_HOST_DEVICE inline int64_t NumPairs(int64_t features) {
  return features * (features - 1) / 2;
}

// The column of pair (i, j), i > j, in DLRM's order: (1,0), (2,0), (2,1),
// (3,0), ... that is, row-major over the strict lower triangle.
EMBER_HOST_DEVICE inline int64_t PairIndex(int64_t i, int64_t j) { return i * (i - 1) / 2 + j; }

void InteractionForwardCpu(const InteractionArgs& args);
void InteractionBackwardCpu(const InteractionArgs& args);
// `op` names the pushed op in CUDA errors.
void InteractionForwardCuda(const InteractionArgs& args, void* stream, std::string_view op);
void InteractionBackwardCuda(const InteractionArgs& args, void* stream, std::string_view op);

}  // namespace ember::ops::internal
