// The CPU matmul kernel: one cblas_sgemm, row-major as the tensors are.

#include <cblas.h>

#include "ops/internal/matmul_kernels.h"

namespace ember::ops::internal {

// matmul.cc checked every dimension (non-negative, within int) and
// LeadingDim* keeps the leading dimensions valid: the reference CBLAS exits
// the process on a bad parameter instead of reporting it.
void MatmulCpu(const MatmulArgs& args) {
  if (args.m == 0 || args.n == 0) return;
  cblas_sgemm(CblasRowMajor, args.transpose_a ? CblasTrans : CblasNoTrans,
              args.transpose_b ? CblasTrans : CblasNoTrans, args.m, args.n, args.k, args.alpha,
              args.a, LeadingDimA(args), args.b, LeadingDimB(args), args.beta, args.c, args.n);
}

}  // namespace ember::ops::internal
