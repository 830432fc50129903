#pragma once

// The matmul kernels behind matmul.h, on one argument struct: row-major
// C[m, n] = alpha * op(A) op(B) + beta * C, op(X) = X or X^T. The CPU
// kernel is cblas_sgemm (Debian's BLAS) and runs to completion; the CUDA
// kernel is cublasGemmEx on `stream` (a cudaStream_t) and returns at once; a
// build without CUDA links a stub that throws Unavailable.
//
// Thread safety: reentrant (each call works on its own arguments; the CUDA
// kernel keeps one cuBLAS handle per thread and device).

#include <string_view>

namespace ember::ops::internal {

struct MatmulArgs {
  int m = 0;  // rows of C and op(A)
  int n = 0;  // columns of C and op(B)
  int k = 0;  // columns of op(A), rows of op(B)
  bool transpose_a = false;
  bool transpose_b = false;
  float alpha = 1.0f;
  float beta = 0.0f;
  bool tf32 = false;         // the GPU may use TF32 tensor cores (MatmulPrecision)
  const float* a = nullptr;  // stored [m, k], or [k, m] when transposed
  const float* b = nullptr;  // stored [k, n], or [n, k] when transposed
  float* c = nullptr;        // [m, n]
};

// The row lengths of A and B as stored (at least 1, as BLAS requires of a
// leading dimension even for an empty matrix).
inline int LeadingDimA(const MatmulArgs& args) {
  const int ld = args.transpose_a ? args.m : args.k;
  return ld > 0 ? ld : 1;
}
inline int LeadingDimB(const MatmulArgs& args) {
  const int ld = args.transpose_b ? args.k : args.n;
  return ld > 0 ? ld : 1;
}

void MatmulCpu(const MatmulArgs& args);
// `op` names the pushed op in cuBLAS and CUDA errors.
void MatmulCuda(const MatmulArgs& args, void* stream, std::string_view op);
// LoadMatmulKernels (matmul.h).
void LoadMatmulKernelsCuda(int device, std::string_view op);

}  // namespace ember::ops::internal
