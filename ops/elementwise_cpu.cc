// The CPU elementwise kernel (see ops/internal/elementwise_kernels.h): one
// pass over the elements, single-threaded on the op's worker.

#include <cstring>
#include <vector>

#include "ops/internal/elementwise_kernels.h"

namespace ember::ops::internal {
namespace {

// Row by row, so the inner loop runs along memory; double sums, as the CUDA
// kernel keeps them.
void BiasGradCpu(const ElementwiseArgs& args) {
  const int64_t cols = args.cols;
  if (cols == 0) return;
  std::vector<double> sums(static_cast<std::size_t>(cols), 0.0);
  for (int64_t start = 0; start < args.n; start += cols) {
    const float* row = args.a + start;
    for (int64_t c = 0; c < cols; ++c) sums[c] += row[c];
  }
  for (int64_t c = 0; c < cols; ++c) args.out[c] = static_cast<float>(sums[c]);
}

}  // namespace

void ElementwiseCpu(const ElementwiseArgs& args) {
  if (args.op == ElementwiseOp::kBiasGrad) return BiasGradCpu(args);
  if (args.n == 0) return;
  if (args.op == ElementwiseOp::kCopy) {
    std::memcpy(args.out, args.a, static_cast<std::size_t>(args.n) * sizeof(float));
    return;
  }
  VisitPointwise(args.op, [&args](auto tag) {
    for (int64_t i = 0; i < args.n; ++i) args.out[i] = PointwiseAt<decltype(tag)::kValue>(args, i);
  });
}

}  // namespace ember::ops::internal
