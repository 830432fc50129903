// GpuCount and CudaLoadsKernelsLazily in a build with CUDA (see device.h).

#include <cuda.h>
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

// Through the runtime's entry point, so that nothing links the driver API.
bool CudaLoadsKernelsLazily() {
  using GetLoadingMode = CUresult (*)(CUmoduleLoadingMode*);
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion("cuModuleGetLoadingMode", &entry, 11070, cudaEnableDefault,
                                       &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess || entry == nullptr) {
    (void)cudaGetLastError();  // no driver, or one without the query: not an error here
    return false;
  }
  CUmoduleLoadingMode mode{};
  return reinterpret_cast<GetLoadingMode>(entry)(&mode) == CUDA_SUCCESS &&
         mode == CU_MODULE_LAZY_LOADING;
}

}  // namespace ember
