// Linked instead of loss_cuda.cu when CUDA is not compiled: GPU tensors
// cannot exist then, so this is reached only by a bug or a misuse.

#include "ops/internal/loss_kernels.h"
#include "ops/internal/op_util.h"

namespace ember::ops::internal {

void BceCuda(const LossArgs&, void*, std::string_view op) { ThrowNoCuda(op); }

void SigmoidCuda(const LossArgs&, void*, std::string_view op) { ThrowNoCuda(op); }

}  // namespace ember::ops::internal
