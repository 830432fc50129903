#pragma once

// Dense optimizers: one step that updates a parameter tensor in place from
// its gradient, for the MLP weights and biases of a DLRM-style model (the
// embedding tables have their own, fused into the TBE backward:
// embedding_bag.h). With g the gradient and p the parameter, per element:
//
//   SGD:      g' = g + weight_decay * p
//             with momentum mu: buf = mu * buf + g';  g' = buf
//             p -= lr * g'
//   Adagrad:  g' = g + weight_decay * p
//             sum_sq += g'^2;  p -= lr * g' / (sqrt(sum_sq) + eps)
//   Adam:     m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//             p -= lr * ((m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
//                        + weight_decay * p)
//             t = step, from 1. Weight decay is decoupled (AdamW), as in
//             the TBE's Adam; 0 gives plain Adam.
// State tensors (buf, sum_sq, m, v) have the parameter's shape and start at
// 0 (Fill). Steps of one parameter run in push order (each writes it).
//
// Every tensor of one call lives on one context of one engine (the CPU, or
// one GPU); the op runs there, kNormal. The CPU and the GPU run the same
// per-element code (nvcc may fuse its multiply-adds), so they agree to
// rounding.
//
// Errors: InvalidArgument from the call, naming the op and the argument: a
// non-f32 tensor, a shape mismatch, a state that is the parameter or the
// gradient, a missing momentum buffer, a hyperparameter out of range (all
// finite; lr, weight_decay >= 0; momentum, b1, b2 in [0, 1); eps > 0), a
// step below 1, tensors on two contexts. A CUDA error is the op's error.
//
// Thread safety: the push functions are thread-safe (they push engine ops).
// The tensors must stay alive until the pushed op has run (a Tensor's
// deletion is deferred through the engine, so destroying it is safe).

#include <cstdint>

#include "storage/tensor.h"

namespace ember::ops {

using storage::Tensor;

// Named Dense*, apart from embedding_bag.h's SgdOptions and AdamOptions.
struct DenseSgdOptions {
  float learning_rate = 0.01f;
  float momentum = 0.0f;
  float weight_decay = 0.0f;
};
struct DenseAdagradOptions {
  float learning_rate = 0.01f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
};
struct DenseAdamOptions {
  float learning_rate = 0.001f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
};

// One SGD step. `momentum_buffer` is required when options.momentum != 0
// and may be null otherwise (a given buffer is kept as buf above). Reads
// grad; writes param and the buffer.
void SgdUpdate(Tensor& param, const Tensor& grad, const DenseSgdOptions& options,
               Tensor* momentum_buffer = nullptr);

// One Adagrad step. Reads grad; writes param and sum_sq.
void AdagradUpdate(Tensor& param, Tensor& sum_sq, const Tensor& grad,
                   const DenseAdagradOptions& options);

// One Adam step; `step` is this step's number, from 1 (the bias
// corrections are computed in double on the host). Reads grad; writes
// param, m and v.
void AdamUpdate(Tensor& param, Tensor& m, Tensor& v, const Tensor& grad, int64_t step,
                const DenseAdamOptions& options);

}  // namespace ember::ops
