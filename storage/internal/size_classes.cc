#include "storage/internal/size_classes.h"

#include <bit>
#include <limits>

#include <fmt/format.h>

#include "storage/memory.h"

namespace ember::storage::internal {
namespace {

std::size_t RoundUp(std::size_t bytes, std::size_t multiple) {
  if (bytes > std::numeric_limits<std::size_t>::max() - (multiple - 1)) {
    throw OutOfMemory(fmt::format("[SizeClasses] {} bytes cannot be rounded up", bytes));
  }
  return (bytes + multiple - 1) / multiple * multiple;
}

}  // namespace

SizeClasses SizeClasses::Round(std::size_t page_size, int cutoff_log2) {
  return SizeClasses(page_size, std::size_t{1} << cutoff_log2);
}

SizeClasses SizeClasses::Exact(std::size_t page_size) { return SizeClasses(page_size, 0); }

std::size_t SizeClasses::Round(std::size_t bytes) const {
  if (cutoff_ == 0 || bytes > cutoff_) return RoundUp(bytes, cutoff_ == 0 ? page_ : cutoff_);
  return std::max(page_, std::bit_ceil(bytes));
}

}  // namespace ember::storage::internal
