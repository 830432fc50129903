// Linked instead of elementwise_cuda.cu when CUDA is not compiled: GPU
// tensors cannot exist then, so this is reached only by a bug or a misuse.

#include "ops/internal/elementwise_kernels.h"
#include "ops/internal/op_util.h"

namespace ember::ops::internal {

void ElementwiseCuda(const ElementwiseArgs&, void*, std::string_view op) { ThrowNoCuda(op); }

}  // namespace ember::ops::internal
