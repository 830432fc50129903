// Linked instead of interaction_cuda.cu when CUDA is not compiled: GPU
// tensors cannot exist then, so this is reached only by a bug or a misuse.

#include <string>

#include "engine/error.h"
#include "ops/internal/interaction_kernels.h"

namespace ember::ops::internal {

void InteractionForwardCuda(const InteractionArgs&, void*, std::string_view op) {
  throw Unavailable("[" + std::string(op) + "] this build of Ember has no CUDA");
}

void InteractionBackwardCuda(const InteractionArgs&, void*, std::string_view op) {
  throw Unavailable("[" + std::string(op) + "] this build of Ember has no CUDA");
}

}  // namespace ember::ops::internal
