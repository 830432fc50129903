#pragma once

// Matrix multiplication of f32 tensors, the dense layers of a DLRM-style
// MLP: cuBLAS (cublasGemmEx in f32) on a GPU, the system BLAS (cblas_sgemm)
// on the CPU.
//
// Row-major throughout: C[M, N] = alpha * op(A) op(B) + beta * C, where
// op(A) is A ([M, K]) or, with transpose_a, A^T (A stored as [K, M]), and
// likewise op(B) is B ([K, N]) or B^T (B stored as [N, K]). A layer's
// forward y = x W^T is Matmul(x, w, y, false, true); its gradients are
// dx = dy W (Matmul(dy, w, dx)) and dW = dy^T x (Matmul(dy, x, dw, true)).
// As in BLAS, beta == 0 overwrites C without reading it (NaN in an
// uninitialized C does not leak through), and K == 0 gives C = beta * C.
//
// Numerics: f32 inputs and products with f32 accumulation; the order of the
// sums is the library's, so the CPU and the GPU agree to rounding (a few
// ulp times sqrt(K)), not bit for bit. By default cuBLAS runs without TF32
// (CUBLAS_COMPUTE_32F, as cublasSgemm); see MatmulPrecision.
//
// Thread safety: thread-safe (pushes an engine op). The tensors must stay
// alive until the op has run (a Tensor's deletion is deferred through the
// engine, so destroying it is safe).

#include <cstdint>

#include "storage/tensor.h"

namespace ember::ops {

using storage::Tensor;

// What a GPU's matmul may trade for speed. kFloat32: f32 multiplies, as
// cublasSgemm does by default. kTensorFloat32 allows (as PyTorch's
// allow_tf32 does) tensor cores that round each input to TF32 (a 10-bit
// mantissa, about 5e-4 relative) and accumulate in f32: several times the
// f32 rate on Ampere and later GPUs, with a product's relative error about
// 1e-3 instead of 1e-6, which training tolerates and a comparison of bits
// does not. An allowance, not a demand: the CPU kernel computes f32 either
// way, so the result depends on the device.
enum class MatmulPrecision : uint8_t { kFloat32, kTensorFloat32 };

// C = alpha * op(A) op(B) + beta * C (see above). a, b, c: 2-D f32 tensors
// on one context of one engine; c is [M, N] and distinct from a and b.
// Pushes one kNormal op on that context that reads a and b and writes c
// (reading it too when beta != 0). Throws InvalidArgument, naming the
// argument, for a non-f32 or non-2-D tensor, mismatched shapes ("[Matmul]
// `b` has shape [3, 4]; expected [5, 4]"), a dimension past INT_MAX (BLAS
// takes int), an aliased c, or tensors on two contexts. A cuBLAS failure is
// the op's error (a CudaError naming the call), thrown by a wait on c.
void Matmul(const Tensor& a, const Tensor& b, Tensor& c, bool transpose_a = false,
            bool transpose_b = false, float alpha = 1.0f, float beta = 0.0f,
            MatmulPrecision precision = MatmulPrecision::kFloat32);

// Makes the calling thread's cuBLAS handle on GPU `device` now (the thread
// keeps it), which loads cuBLAS's kernels. A GPU's first matmul does this
// otherwise, and the load waits for the GPUs' queued work while it holds
// the driver's lock. So a process that runs collectives between its GPUs
// calls this for each of them before the first collective: a load beside
// a collective that waits for a rank whose thread that lock holds back
// never ends (docs/train.md, "Several GPUs"). Throws Unavailable in a
// build without CUDA, CudaError naming the call when CUDA or cuBLAS fails.
void LoadMatmulKernels(int device);

}  // namespace ember::ops
