// The CPU column concatenation kernel (see ops/internal/concat_kernels.h):
// one memcpy per row and part.

#include <cstring>

#include "ops/internal/concat_kernels.h"

namespace ember::ops::internal {

void ConcatCpu(const ConcatArgs& args) {
  for (int k = 0; k < args.num_parts; ++k) {
    const int64_t width = args.part_width[k];
    const std::size_t bytes = static_cast<std::size_t>(width) * sizeof(float);
    if (bytes == 0) continue;
    for (int64_t b = 0; b < args.rows; ++b) {
      float* whole = args.whole + b * args.width + args.part_offset[k];
      float* part = args.part[k] + b * width;
      if (args.direction == ConcatDirection::kToWhole) {
        std::memcpy(whole, part, bytes);
      } else {
        std::memcpy(part, whole, bytes);
      }
    }
  }
}

}  // namespace ember::ops::internal
