#pragma once

// Elementwise ops on f32 tensors: what a DLRM-style MLP needs beside its
// matmuls (bias, ReLU and their gradients), initialization (fill, seeded
// random), and the basics a training loop uses (scale, axpy, add, mul,
// copy).
//
// Every function checks its arguments and pushes one engine op (kNormal) on
// the tensors' context, the CPU or one GPU: all tensors of a call must live
// on one context of one engine. "Reads" and "writes" name the tensors whose
// vars the op declares as const and mutable; a written tensor that is also
// an input (AddBias's y, Scale's x, Axpy's y, an out passed as an input) is
// read and written. The CPU and the GPU compute each element with the same
// code, but nvcc may fuse a multiply-add (Axpy) that the CPU rounds twice,
// so their results can differ in the last bits; the random fills cannot.
//
// Errors: InvalidArgument, thrown by the call, naming the op and the
// argument: an empty or non-f32 tensor, a shape mismatch ("[AddBias] `bias`
// has shape [3]; expected [4]"), tensors on two contexts or engines, a bad
// scalar. The kernels themselves do not fail on valid arguments; a CUDA
// error becomes the op's error (thrown by the next wait on a written var).
//
// Thread safety: the push functions are thread-safe (they push engine ops).
// The tensors must stay alive until the pushed op has run (a Tensor's
// deletion is deferred through the engine, so destroying it is safe).

#include <cstdint>

#include "storage/tensor.h"

namespace ember::ops {

using storage::Tensor;

// y[m, n] += bias[n]. y: [M, N]; bias: [N]. Reads bias; writes y.
void AddBias(Tensor& y, const Tensor& bias);

// y = Relu(y + bias): AddBias then Relu in one pass over y, with the same
// result bit for bit (a hidden layer's output; ReluGrad takes it as `y`).
// Reads bias; writes y.
void AddBiasRelu(Tensor& y, const Tensor& bias);

// db[n] = sum over m of dy[m, n] (AddBias's gradient for bias). dy: [M, N];
// db: [N], overwritten (0 for M == 0). Sums in double on both kernels.
// Reads dy; writes db.
void BiasGrad(const Tensor& dy, Tensor& db);

// y = x > 0 ? x : 0 (NaN gives 0). y has x's shape and may be x (in place).
// Reads x; writes y.
void Relu(const Tensor& x, Tensor& y);

// dx = y > 0 ? dy : 0, Relu's gradient. `y` is Relu's output or its input
// (both are positive at the same places), so an in-place Relu keeps what its
// gradient needs. dy, y, dx: one shape; dx may be dy. Reads dy, y; writes dx.
void ReluGrad(const Tensor& dy, const Tensor& y, Tensor& dx);

// x[i] = value. Writes x.
void Fill(Tensor& x, float value);

// The counter-based generator behind the random fills: the 64 random bits
// number `counter` of stream `seed` (SplitMix64 of the seed's SplitMix64
// plus counter times the golden ratio). The CPU and the GPU compute the
// same bits; a program can reproduce any fill with it.
uint64_t RandomBits(uint64_t seed, uint64_t counter);

// Seeded random fills. x[i] depends on (seed, i) only: the CPU and the GPU
// produce the same bits, and a tensor of n elements gets the first n values
// of any larger one with the same seed. Use distinct seeds for distinct
// tensors.
// Uniform in [lo, hi) (hi only by rounding), 24 random bits per element:
// x[i] = lo + (hi - lo) * (RandomBits(seed, i) >> 40) * 2^-24.
// REQUIRES (InvalidArgument): lo, hi finite, lo <= hi. Writes x.
void RandomUniform(Tensor& x, uint64_t seed, float lo = 0.0f, float hi = 1.0f);
// Normal(mean, stddev) by Box-Muller (a cosine per element, 106 random
// bits): x[i] = mean + stddev * sqrt(-2 ln u1) cos(2 pi u2), with
// u1 = ((RandomBits(seed, 2i) >> 11) + 1) * 2^-53 and
// u2 = (RandomBits(seed, 2i + 1) >> 11) * 2^-53.
// REQUIRES (InvalidArgument): mean, stddev finite, stddev >= 0. Writes x.
void RandomNormal(Tensor& x, uint64_t seed, float mean = 0.0f, float stddev = 1.0f);

// x *= alpha. Reads and writes x.
void Scale(Tensor& x, float alpha);

// y += alpha * x. x, y: one shape, distinct tensors. Reads x; writes y.
void Axpy(float alpha, const Tensor& x, Tensor& y);

// out = a + b and out = a * b, per element. a, b, out: one shape; out may be
// a or b. Reads a, b; writes out.
void Add(const Tensor& a, const Tensor& b, Tensor& out);
void Mul(const Tensor& a, const Tensor& b, Tensor& out);

// dst = src, element for element, on one context (a cudaMemcpyAsync within
// one GPU). Shapes may differ when the element counts match (a reshape).
// For copies between contexts, use Tensor::CopyTo. Reads src; writes dst.
void Copy(const Tensor& src, Tensor& dst);

}  // namespace ember::ops
