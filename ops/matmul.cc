// Checks and dispatch of Matmul (see matmul.h).

#include "ops/matmul.h"

#include <climits>
#include <cstdint>
#include <string_view>

#include <fmt/format.h>

#include "engine/error.h"
#include "ops/internal/dense_checks.h"
#include "ops/internal/matmul_kernels.h"

namespace ember::ops {
namespace {

constexpr std::string_view kOp = "Matmul";

int CheckIntDim(std::string_view arg, const Tensor& tensor, int64_t dim) {
  if (dim <= INT_MAX) return static_cast<int>(dim);
  throw InvalidArgument(fmt::format("[{}] `{}` has shape {}; BLAS takes dimensions up to {}", kOp,
                                    arg, internal::ShapeString(tensor.shape()), INT_MAX));
}

}  // namespace

void Matmul(const Tensor& a, const Tensor& b, Tensor& c, bool transpose_a, bool transpose_b,
            float alpha, float beta, MatmulPrecision precision) {
  internal::CheckF32Rank(kOp, "a", a, 2);
  internal::CheckF32Rank(kOp, "b", b, 2);
  internal::CheckF32Rank(kOp, "c", c, 2);
  const int64_t m = a.shape()[transpose_a ? 1 : 0];
  const int64_t k = a.shape()[transpose_a ? 0 : 1];
  const int64_t n = b.shape()[transpose_b ? 0 : 1];
  internal::CheckShape(kOp, "b", b, transpose_b ? std::vector<int64_t>{n, k} : std::vector{k, n});
  internal::CheckShape(kOp, "c", c, {m, n});
  internal::CheckNotSame(kOp, "c", c, "a", a);
  internal::CheckNotSame(kOp, "c", c, "b", b);
  const engine::Context ctx = internal::CheckSamePlace(kOp, {&a, &b, &c});
  const internal::MatmulArgs args{.m = CheckIntDim("a", a, m),
                                  .n = CheckIntDim("b", b, n),
                                  .k = CheckIntDim("a", a, k),
                                  .transpose_a = transpose_a,
                                  .transpose_b = transpose_b,
                                  .alpha = alpha,
                                  .beta = beta,
                                  .tf32 = precision == MatmulPrecision::kTensorFloat32,
                                  .a = a.data<float>(),
                                  .b = b.data<float>(),
                                  .c = c.data<float>()};
  internal::PushKernel(kOp, ctx, {&a, &b}, {&c}, [args, gpu = ctx.is_gpu()](void* stream) {
    if (gpu) {
      internal::MatmulCuda(args, stream, kOp);
    } else {
      internal::MatmulCpu(args);
    }
  });
}

void LoadMatmulKernels(int device) { internal::LoadMatmulKernelsCuda(device, "LoadMatmulKernels"); }

}  // namespace ember::ops
