// Linked instead of optimizer_cuda.cu when CUDA is not compiled: GPU
// tensors cannot exist then, so this is reached only by a bug or a misuse.

#include <string>

#include "engine/error.h"
#include "ops/internal/optimizer_kernels.h"

namespace ember::ops::internal {

void OptimizerCuda(const OptimizerArgs&, void*, std::string_view op) {
  throw Unavailable("[" + std::string(op) + "] this build of Ember has no CUDA");
}

}  // namespace ember::ops::internal
