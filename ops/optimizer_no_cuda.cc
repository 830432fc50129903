// Linked instead of optimizer_cuda.cu when CUDA is not compiled: GPU
// tensors cannot exist then, so this is reached only by a bug or a misuse.

#include "ops/internal/op_util.h"
#include "ops/internal/optimizer_kernels.h"

namespace ember::ops::internal {

void OptimizerCuda(const OptimizerArgs&, void*, std::string_view op) { ThrowNoCuda(op); }

}  // namespace ember::ops::internal
