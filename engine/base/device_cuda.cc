// GpuCount in a build with CUDA (see device.h).

#include <cuda_runtime_api.h>

#include "engine/base/device.h"

namespace ember {

int GpuCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver or no device: not an error here
    return 0;
  }
  return count;
}

}  // namespace ember
