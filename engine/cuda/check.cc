#include "engine/cuda/check.h"

#include <string>

#include <fmt/format.h>

#include "engine/base/logging.h"
#include "engine/error.h"

namespace ember {
namespace {

std::string Describe(cudaError_t status, std::string_view what, std::string_view op,
                     SourcePlace where) {
  const std::string context =
      op.empty() ? std::string(what) : fmt::format("{} of op '{}'", what, op);
  return fmt::format("[{}] {} ({}) at {}:{}", context, cudaGetErrorName(status),
                     cudaGetErrorString(status), where.file, where.line);
}

}  // namespace

void ThrowCudaError(cudaError_t status, std::string_view what, std::string_view op,
                    SourcePlace where) {
  (void)cudaGetLastError();
  throw CudaError(Describe(status, what, op, where));
}

bool CudaLogIfError(cudaError_t status, std::string_view what, SourcePlace where) {
  if (status == cudaSuccess) return true;
  (void)cudaGetLastError();
  Log().error("{}", Describe(status, what, {}, where));
  return false;
}

}  // namespace ember
