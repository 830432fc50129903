#pragma once

// The CUDA side of Tensor: copies launched on an op's stream. A build with
// CUDA links tensor_copy_cuda.cc; one without links tensor_copy_no_cuda.cc,
// whose copy throws Unavailable (no GPU context can run there anyway).
//
// Thread safety: thread-safe.

#include <cstddef>
#include <string_view>

namespace ember::storage::internal {

// Enqueues a copy of `bytes` from `src` to `dst` on `stream` (a cudaStream_t)
// and returns without waiting for it. A device id >= 0 marks device memory
// of that GPU, -1 memory the host can address (pageable, pinned, managed):
// device memory of two different GPUs is copied peer to peer, anything else
// through unified addressing. Throws CudaError naming the call and `op`.
void CopyAsync(void* dst, int dst_device, const void* src, int src_device, std::size_t bytes,
               void* stream, std::string_view op);

}  // namespace ember::storage::internal
