#include "engine/internal/cuda/cuda_check.h"

#include <string>

#include <fmt/format.h>

#include "engine/error.h"
#include "engine/internal/logging.h"

namespace ember::engine::internal {
namespace {

std::string Describe(cudaError_t status, std::string_view what, const std::source_location& where) {
  return fmt::format("[{}] {} ({}) at {}:{}", what, cudaGetErrorName(status),
                     cudaGetErrorString(status), where.file_name(), where.line());
}

}  // namespace

void CudaCheck(cudaError_t status, std::string_view what, std::source_location where) {
  if (status == cudaSuccess) return;
  (void)cudaGetLastError();
  throw CudaError(Describe(status, what, where));
}

bool CudaLogIfError(cudaError_t status, std::string_view what, std::source_location where) {
  if (status == cudaSuccess) return true;
  (void)cudaGetLastError();
  Log().error("{}", Describe(status, what, where));
  return false;
}

int CudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver or no device: not an error here
    return 0;
  }
  return count;
}

}  // namespace ember::engine::internal
