// Tensor copies in a build without CUDA: there is no GPU to copy to or from.

#include <fmt/format.h>

#include "engine/error.h"
#include "storage/internal/tensor_copy.h"

namespace ember::storage::internal {

void CopyAsync(void*, int, const void*, int, std::size_t, void*, std::string_view op) {
  throw Unavailable(fmt::format("[Tensor::CopyTo] op '{}': built without CUDA", op));
}

}  // namespace ember::storage::internal
