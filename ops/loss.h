#pragma once

// The loss of a DLRM-style click model: a sigmoid on the top MLP's logit
// and binary cross-entropy against 0/1 labels, fused with its gradient.
//
//   loss = mean over i of  -[y_i log s(x_i) + (1 - y_i) log(1 - s(x_i))]
//        = mean over i of  max(x_i, 0) - x_i y_i + log1p(exp(-|x_i|))
//   grad_logits[i] = (s(x_i) - y_i) / N
// with s the logistic sigmoid and N the number of logits, or the size of
// the whole batch where these logits are one data-parallel rank's part of
// it (`mean_over`): then the ranks' losses and gradients, summed, are the
// whole batch's, as one process computes them. The second form
// is finite for every finite logit (no log of 0, no overflowing exp), so a
// confident wrong prediction gives a large loss, not inf or NaN. The
// gradient is computed as s(x)(1 - y) - s(-x) y, so a confident right
// prediction keeps its small gradient to full f32 precision (s(x) - 1
// would round it away). Labels may be any value in [0, 1] (soft labels);
// they are not checked.
//
// Numerics: per element in f32 (the CPU's libm and CUDA's expf/log1pf
// differ by an ulp or so); the mean is summed in double in a fixed order on
// both, so the GPU's loss is the same on every run.
//
// Every tensor of one call lives on one context of one engine (the CPU, or
// one GPU); the op runs there, kNormal. Errors: InvalidArgument from the
// call, naming the op and the argument (non-f32 tensors, shape mismatches,
// no logits, tensors on two contexts). A CUDA error is the op's error.
//
// Thread safety: the push functions are thread-safe (they push engine ops).
// The tensors must stay alive until the pushed op has run (a Tensor's
// deletion is deferred through the engine, so destroying it is safe).

#include <cstdint>

#include "storage/tensor.h"

namespace ember::ops {

using storage::Tensor;

// The mean loss and its gradient (see above). logits: N >= 1 elements, of
// any shape ([N] or DLRM's [N, 1]); labels and grad_logits: logits' shape;
// loss: one element. Reads logits, labels; writes loss and grad_logits
// (distinct from the inputs and from each other). `mean_over`: the mean's
// divisor, N when 0; otherwise at least N (InvalidArgument).
void SigmoidBinaryCrossEntropy(const Tensor& logits, const Tensor& labels, Tensor& loss,
                               Tensor& grad_logits, int64_t mean_over = 0);

// probs = s(logits), the click probabilities. probs has logits' shape and
// may be logits. Reads logits; writes probs.
void Sigmoid(const Tensor& logits, Tensor& probs);

}  // namespace ember::ops
