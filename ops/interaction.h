#pragma once

// DLRM's dot feature interaction: per sample, the dot products of every
// pair of its F feature vectors (the bottom MLP's output and the embedding
// bags' pooled rows, each of dimension D).
//
// Layout.
//  - input: [B, F, D] f32; sample b's feature i is input[b, i, :]. In DLRM
//    the dense (bottom MLP) vector is feature 0 and the T embeddings
//    follow, F = T + 1.
//  - output: [B, F(F-1)/2] f32, the strict lower triangle of
//    Z = X X^T (X = input[b]) row by row, as DLRM's interact_features
//    (self-interaction off) orders it: pairs (i, j) with i > j, ordered by
//    i then j, pair (i, j) at column i(i-1)/2 + j:
//      (1,0) (2,0) (2,1) (3,0) (3,1) (3,2) ...
//    DLRM concatenates the dense vector in front of these before the top
//    MLP; that is the caller's (e.g. a Matmul per part, or a Copy).
// Every tensor of one call lives on one context of one engine (the CPU, or
// one GPU); the op runs there, kNormal.
//
// Numerics: f32 products and sums (D terms per dot product); the CPU and
// GPU kernels add in different orders, so they agree to rounding.
//
// Errors: InvalidArgument from the call, naming the op and the argument (a
// non-f32 or non-3-D input, a shape mismatch, an output that is the input,
// tensors on two contexts). A CUDA error is the op's error.
//
// Thread safety: the push functions are thread-safe (they push engine ops).
// The tensors must stay alive until the pushed op has run (a Tensor's
// deletion is deferred through the engine, so destroying it is safe).

#include "storage/tensor.h"

namespace ember::ops {

using storage::Tensor;

// output[b, i(i-1)/2 + j] = <input[b, i, :], input[b, j, :]> for i > j.
// Reads input; writes output ([B, F(F-1)/2]).
void DotInteraction(const Tensor& input, Tensor& output);

// The gradient of DotInteraction with respect to its input:
//   grad_input[b, k, :] = sum over m != k of dZ[b, (k, m)] * input[b, m, :]
// where dZ[b, (k, m)] is grad_output[b, pair index of (max, min)]. Reads
// input ([B, F, D]) and grad_output ([B, F(F-1)/2]); writes grad_input
// ([B, F, D], overwritten; distinct from both inputs).
void DotInteractionBackward(const Tensor& input, const Tensor& grad_output, Tensor& grad_input);

}  // namespace ember::ops
