// TbeUploadCuda (embedding_bag_upload.h): the per-table arrays as kernel
// parameters of store kernels.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "ops/internal/cuda_launch.cuh"
#include "ops/internal/embedding_bag_upload.h"

namespace ember::ops::internal {
namespace {

// Values per launch: 3840 bytes, inside the 4 KiB every GPU takes as kernel
// parameters.
constexpr int kUploadChunk = 480;
struct UploadChunk {
  int64_t values[kUploadChunk];
};

__global__ void StoreKernel(const UploadChunk chunk, int count, int64_t* dst) {
  for (int i = threadIdx.x; i < count; i += blockDim.x) dst[i] = chunk.values[i];
}

}  // namespace

void TbeUploadCuda(const int64_t* values, int64_t count, int64_t* dst, int /*device*/,
                   void* stream) {
  for (int64_t first = 0; first < count; first += kUploadChunk) {
    const int n = static_cast<int>(std::min<int64_t>(kUploadChunk, count - first));
    UploadChunk chunk;
    std::copy(values + first, values + first + n, chunk.values);
    StoreKernel<<<1, 128, 0, AsStream(stream)>>>(chunk, n, dst + first);
    CudaCheckLaunch("StoreKernel", "TbeUploadCuda");
  }
}

}  // namespace ember::ops::internal
