// The CPU dot-interaction kernels (see ops/internal/interaction_kernels.h).

#include <algorithm>

#include "ops/internal/interaction_kernels.h"

namespace ember::ops::internal {

void InteractionForwardCpu(const InteractionArgs& args) {
  const int64_t f = args.features;
  const int64_t d = args.dim;
  const int64_t pairs = NumPairs(f);
  for (int64_t b = 0; b < args.batch; ++b) {
    const float* x = args.input + b * f * d;
    float* out = args.output + b * pairs;
    for (int64_t i = 1; i < f; ++i) {
      for (int64_t j = 0; j < i; ++j) {
        float dot = 0.0f;
        for (int64_t e = 0; e < d; ++e) dot += x[i * d + e] * x[j * d + e];
        out[PairIndex(i, j)] = dot;
      }
    }
  }
}

// Z[i][j] = <x_i, x_j> for i > j, so dL/dx_i gets dZ[i][j] x_j and dL/dx_j
// gets dZ[i][j] x_i: one pass over the pairs, scattering both ways.
void InteractionBackwardCpu(const InteractionArgs& args) {
  const int64_t f = args.features;
  const int64_t d = args.dim;
  const int64_t pairs = NumPairs(f);
  std::fill(args.grad_input, args.grad_input + args.batch * f * d, 0.0f);
  for (int64_t b = 0; b < args.batch; ++b) {
    const float* x = args.input + b * f * d;
    const float* dz = args.grad_output + b * pairs;
    float* dx = args.grad_input + b * f * d;
    for (int64_t i = 1; i < f; ++i) {
      for (int64_t j = 0; j < i; ++j) {
        const float g = dz[PairIndex(i, j)];
        for (int64_t e = 0; e < d; ++e) {
          dx[i * d + e] += g * x[j * d + e];
          dx[j * d + e] += g * x[i * d + e];
        }
      }
    }
  }
}

}  // namespace ember::ops::internal
