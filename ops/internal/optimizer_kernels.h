#pragma once

// The dense optimizer kernels behind optimizer.h, on one argument struct,
// and their per-element update, written once for both kernels (the CUDA
// kernel may fuse multiply-adds that the CPU rounds twice). The CPU kernel
// runs to completion; the CUDA kernel launches on `stream` (a cudaStream_t)
// and returns; a build without CUDA links a stub that throws Unavailable.
//
// Thread safety: reentrant (each call works on its own arguments).

#include <cmath>
#include <cstdint>
#include <string_view>

#include "ops/internal/host_device.h"

namespace ember::ops::internal {

enum class DenseOptimizer : uint8_t { kSgd, kAdagrad, kAdam };

struct OptimizerArgs {
  DenseOptimizer kind = DenseOptimizer::kSgd;
  int64_t n = 0;
  float* param = nullptr;
  const float* grad = nullptr;
  float* state1 = nullptr;  // SGD: momentum (null without); Adagrad: sum of g^2; Adam: m
  float* state2 = nullptr;  // Adam: v
  float learning_rate = 0.0f;
  float weight_decay = 0.0f;
  float momentum = 0.0f;  // SGD
  float eps = 0.0f;       // Adagrad, Adam
  float beta1 = 0.0f;     // Adam
  float beta2 = 0.0f;
  float bias_correction1 = 1.0f;  // Adam: 1 - beta1^step
  float bias_correction2 = 1.0f;  // Adam: 1 - beta2^step
};

// Updates element i of the parameter and its state (the formulas of
// optimizer.h). A template, so that each kernel's loop has no switch.
template <DenseOptimizer kKind>
EMBER_HOST_DEVICE inline void UpdateAt(const OptimizerArgs& a, int64_t i) {
  const float p = a.param[i];
  if constexpr (kKind == DenseOptimizer::kSgd) {
    float g = a.grad[i] + a.weight_decay * p;
    if (a.state1 != nullptr) {
      g += a.momentum * a.state1[i];
      a.state1[i] = g;
    }
    a.param[i] = p - a.learning_rate * g;
  } else if constexpr (kKind == DenseOptimizer::kAdagrad) {
    const float g = a.grad[i] + a.weight_decay * p;
    const float sum_sq = a.state1[i] + g * g;
    a.state1[i] = sum_sq;
    a.param[i] = p - a.learning_rate * g / (sqrtf(sum_sq) + a.eps);
  } else {
    const float g = a.grad[i];
    const float m = a.beta1 * a.state1[i] + (1.0f - a.beta1) * g;
    const float v = a.beta2 * a.state2[i] + (1.0f - a.beta2) * g * g;
    a.state1[i] = m;
    a.state2[i] = v;
    const float step = (m / a.bias_correction1) / (sqrtf(v / a.bias_correction2) + a.eps);
    a.param[i] = p - a.learning_rate * (step + a.weight_decay * p);
  }
}

void OptimizerCpu(const OptimizerArgs& args);
// `op` names the pushed op in CUDA errors.
void OptimizerCuda(const OptimizerArgs& args, void* stream, std::string_view op);

}  // namespace ember::ops::internal
