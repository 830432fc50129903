#include "engine/internal/cuda/cuda_check.h"

#include <string>

#include <fmt/format.h>

#include "engine/error.h"
#include "engine/internal/logging.h"

namespace ember::engine::internal {
namespace {

std::string Describe(cudaError_t status, std::string_view what, std::string_view op,
                     const std::source_location& where) {
  const std::string context =
      op.empty() ? std::string(what) : fmt::format("{} of op '{}'", what, op);
  return fmt::format("[{}] {} ({}) at {}:{}", context, cudaGetErrorName(status),
                     cudaGetErrorString(status), where.file_name(), where.line());
}

}  // namespace

void ThrowCudaError(cudaError_t status, std::string_view what, std::string_view op,
                    std::source_location where) {
  (void)cudaGetLastError();
  throw CudaError(Describe(status, what, op, where));
}

bool CudaLogIfError(cudaError_t status, std::string_view what, std::source_location where) {
  if (status == cudaSuccess) return true;
  (void)cudaGetLastError();
  Log().error("{}", Describe(status, what, {}, where));
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
