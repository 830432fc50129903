// Linked instead of interaction_cuda.cu when CUDA is not compiled: GPU
// tensors cannot exist then, so this is reached only by a bug or a misuse.

#include "ops/internal/interaction_kernels.h"
#include "ops/internal/op_util.h"

namespace ember::ops::internal {

void InteractionForwardCuda(const InteractionArgs&, void*, std::string_view op) { ThrowNoCuda(op); }

void InteractionBackwardCuda(const InteractionArgs&, void*, std::string_view op) {
  ThrowNoCuda(op);
}

}  // namespace ember::ops::internal
