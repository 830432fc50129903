// The CUDA column concatenation kernel (see ops/internal/concat_kernels.h):
// the grid is cut into tiles of each part in turn, so that a part's reads
// or writes are contiguous and the whole's are coalesced along each row,
// and no block idles. Indices are 32-bit when the whole has fewer than 2^31
// elements. (One thread per element of the whole, each searching the parts
// and dividing in 64 bits, took 57 us for DLRM's [8192, 64 + 1664] on an
// H200.)

#include <cstdint>
#include <limits>
#include <string>

#include "engine/error.h"
#include "ops/internal/concat_kernels.h"
#include "ops/internal/cuda_launch.cuh"

namespace ember::ops::internal {
namespace {

// Each block copies one tile of kTileItems consecutive elements of one
// part; `tile_end[k]` is the end of part k's tiles in the grid.
constexpr int kItemsPerThread = 4;
constexpr int kTileItems = kBlockThreads * kItemsPerThread;

struct PartTiles {
  int64_t tile_end[kMaxParts] = {};
};

template <typename Index>
__global__ void __launch_bounds__(kBlockThreads) ConcatKernel(ConcatArgs args, PartTiles tiles) {
  int k = 0;
  while (blockIdx.x >= tiles.tile_end[k]) ++k;
  const auto tile = static_cast<Index>(blockIdx.x - (k == 0 ? 0 : tiles.tile_end[k - 1]));
  const auto width = static_cast<Index>(args.part_width[k]);
  const auto n = static_cast<Index>(args.rows) * width;
  const auto whole_width = static_cast<Index>(args.width);
  float* whole = args.whole + args.part_offset[k];
  float* part = args.part[k];
  Index i = tile * kTileItems + static_cast<Index>(threadIdx.x);
#pragma unroll
  for (int e = 0; e < kItemsPerThread; ++e, i += kBlockThreads) {
    if (i >= n) return;
    const Index at = i / width * whole_width + i % width;
    if (args.direction == ConcatDirection::kToWhole) {
      whole[at] = part[i];
    } else {
      part[i] = whole[at];
    }
  }
}

}  // namespace

void ConcatCuda(const ConcatArgs& args, void* stream, std::string_view op) {
  const int64_t n = args.rows * args.width;
  if (n == 0) return;
  PartTiles tiles;
  int64_t end = 0;
  for (int k = 0; k < args.num_parts; ++k) {
    end += (args.rows * args.part_width[k] + kTileItems - 1) / kTileItems;
    tiles.tile_end[k] = end;
  }
  if (end > std::numeric_limits<int32_t>::max()) {
    throw InvalidArgument(std::string("[") + std::string(op) + "] " + std::to_string(n) +
                          " elements; the GPU kernel takes at most 2^31 - 1 tiles of " +
                          std::to_string(kTileItems));
  }
  const auto grid = static_cast<unsigned>(end);
  WithIndexType(n + kTileItems, [&](auto index) {
    ConcatKernel<decltype(index)><<<grid, kBlockThreads, 0, AsStream(stream)>>>(args, tiles);
  });
  CudaCheckLaunch("ConcatKernel", op);
}

}  // namespace ember::ops::internal
