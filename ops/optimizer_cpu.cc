// The CPU dense optimizer kernel (see ops/internal/optimizer_kernels.h).

#include "ops/internal/optimizer_kernels.h"

namespace ember::ops::internal {
namespace {

template <DenseOptimizer kKind>
void Loop(const OptimizerArgs& args) {
  for (int64_t i = 0; i < args.n; ++i) UpdateAt<kKind>(args, i);
}

}  // namespace

void OptimizerCpu(const OptimizerArgs& args) {
  switch (args.kind) {
    case DenseOptimizer::kSgd:
      return Loop<DenseOptimizer::kSgd>(args);
    case DenseOptimizer::kAdagrad:
      return Loop<DenseOptimizer::kAdagrad>(args);
    case DenseOptimizer::kAdam:
      return Loop<DenseOptimizer::kAdam>(args);
  }
}

}  // namespace ember::ops::internal
