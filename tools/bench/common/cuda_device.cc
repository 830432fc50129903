#include "tools/bench/common/cuda_device.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/error.h"

namespace ember::bench {

void CheckCuda(cudaError_t status, const char* call) {
  if (status == cudaSuccess) return;
  throw CudaError(
      absl::StrFormat("%s: %s (%s)", call, cudaGetErrorName(status), cudaGetErrorString(status)));
}

std::optional<std::string> DescribeDevice0(std::string* why) {
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess || devices == 0) {
    (void)cudaGetLastError();
    *why = status != cudaSuccess
               ? absl::StrCat("no CUDA device (cudaGetDeviceCount: ", cudaGetErrorName(status),
                              ", ", cudaGetErrorString(status), ")")
               : "no CUDA device (cudaGetDeviceCount: 0 devices)";
    return std::nullopt;
  }
  cudaDeviceProp prop{};
  CheckCuda(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  CheckCuda(cudaSetDevice(0), "cudaSetDevice");
  int runtime = 0;
  int driver = 0;
  CheckCuda(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
  CheckCuda(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
  return absl::StrFormat("%s (sm_%d%d, %.0f GiB, %d SMs), CUDA runtime %d.%d, driver %d.%d",
                         prop.name, prop.major, prop.minor,
                         static_cast<double>(prop.totalGlobalMem) / double(1 << 30),
                         prop.multiProcessorCount, runtime / 1000, runtime % 1000 / 10,
                         driver / 1000, driver % 1000 / 10);
}

}  // namespace ember::bench
