// Linked instead of matmul_cuda.cc when CUDA is not compiled: GPU tensors
// cannot exist then, so this is reached only by a bug or a misuse.

#include "ops/internal/matmul_kernels.h"
#include "ops/internal/op_util.h"

namespace ember::ops::internal {

void MatmulCuda(const MatmulArgs&, void*, std::string_view op) { ThrowNoCuda(op); }
void LoadMatmulKernelsCuda(int, std::string_view op) { ThrowNoCuda(op); }

}  // namespace ember::ops::internal
