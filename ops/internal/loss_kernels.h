#pragma once

// The loss kernels behind loss.h, on one argument struct, and their
// per-element math, written once for both kernels. The CPU kernels run to
// completion; the CUDA kernels launch on `stream` (a cudaStream_t) and
// return; a build without CUDA links stubs that throw Unavailable.
//
// Thread safety: reentrant (each call works on its own arguments).

#include <cmath>
#include <cstdint>
#include <string_view>

#include "ops/internal/host_device.h"

namespace ember::ops::internal {

struct LossArgs {
  int64_t n = 0;                  // >= 1 for the BCE kernels (loss.cc checks)
  int64_t mean_over = 0;          // the mean's divisor, >= n (BCE)
  const float* logits = nullptr;  // [n]
  const float* labels = nullptr;  // [n], in [0, 1]
  float* loss = nullptr;          // 1 element: the sum over n / mean_over
  float* grad_logits = nullptr;   // [n]
  float* probs = nullptr;         // Sigmoid: [n]
};

// 1 / (1 + e^-x) without overflow: e^-|x| <= 1 is the only exponential.
EMBER_HOST_DEVICE inline float StableSigmoid(float x) {
  const float e = expf(-fabsf(x));
  return x >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
}

// s(x) - y, BCE's gradient before the mean. Not computed as written: for a
// click (y = 1) predicted well (x >> 0), s(x) rounds to within an ulp of 1
// and s(x) - 1 keeps only a few bits. With e = e^-|x|, both s(x) and
// s(-x) = 1 - s(x) come to full precision as 1/(1+e) and e/(1+e), and
//   s(x) - y = s(x) (1 - y) - s(-x) y
// is exact in its terms for 0/1 labels.
EMBER_HOST_DEVICE inline float SigmoidMinusLabel(float x, float y) {
  const float e = expf(-fabsf(x));
  const float near_one = 1.0f / (1.0f + e);
  const float near_zero = e / (1.0f + e);
  const float s_pos = x >= 0.0f ? near_one : near_zero;  // s(x)
  const float s_neg = x >= 0.0f ? near_zero : near_one;  // s(-x)
  return s_pos * (1.0f - y) - s_neg * y;
}

// -[y log s(x) + (1-y) log(1 - s(x))] rewritten as
// max(x, 0) - x y + log(1 + e^-|x|): no log of 0 and no overflow for any
// finite x, and log1p keeps the small terms of large |x|.
EMBER_HOST_DEVICE inline float BceTerm(float x, float y) {
  return fmaxf(x, 0.0f) - x * y + log1pf(expf(-fabsf(x)));
}

void BceCpu(const LossArgs& args);
void SigmoidCpu(const LossArgs& args);
// `op` names the pushed op in CUDA errors.
void BceCuda(const LossArgs& args, void* stream, std::string_view op);
void SigmoidCuda(const LossArgs& args, void* stream, std::string_view op);

}  // namespace ember::ops::internal
