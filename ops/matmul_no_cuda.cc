// Linked instead of matmul_cuda.cc when CUDA is not compiled: GPU tensors
// cannot exist then, so this is reached only by a bug or a misuse.

#include <string>

#include "engine/error.h"
#include "ops/internal/matmul_kernels.h"

namespace ember::ops::internal {

void MatmulCuda(const MatmulArgs&, void*, std::string_view op) {
  throw Unavailable("[" + std::string(op) + "] this build of Ember has no CUDA");
}

}  // namespace ember::ops::internal
