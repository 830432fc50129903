// Tensor copies on CUDA streams (see tensor_copy.h).

#include "storage/internal/tensor_copy.h"

#include <cuda_runtime_api.h>

#include "engine/cuda/check.h"

namespace ember::storage::internal {

void CopyAsync(void* dst, int dst_device, const void* src, int src_device, std::size_t bytes,
               void* stream, std::string_view op) {
  auto* cuda_stream = static_cast<cudaStream_t>(stream);
  if (dst_device >= 0 && src_device >= 0 && dst_device != src_device) {
    CudaCheckForOp(cudaMemcpyPeerAsync(dst, dst_device, src, src_device, bytes, cuda_stream),
                   "cudaMemcpyPeerAsync", op);
    return;
  }
  CudaCheckForOp(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, cuda_stream),
                 "cudaMemcpyAsync", op);
}

}  // namespace ember::storage::internal
