#pragma once

// The miss sort (miss_sort_cuda.cu): a prefetch pass's misses grouped by
// set for the insert, or a list of row moves put into home order. Host
// code, with no device code, so that a test can drive it directly.
//
// Thread safety: SortMissesCuda launches on the caller's stream; the
// buffers are the caller's until that stream reaches the launch's end.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ember::cache::internal::cuda {

// `*count` (device memory) rows (linear ids) and their positions, in
// rows[0] and positions[0]. By set (the misses of a pass): sorted by
// (SetOf(row), row), ties in any order, or by set alone where no set has
// more than 31 of them (the insert orders such a run itself). With
// `by_home`: by the row's high bits only (row >> (row_bits - 16), or the
// row where row_bits <= 16): home order, for the rows' moves. `capacity`
// bounds the count; buffers [1] and `tile_counts` exist only when it is
// above kMissTile (MissTileCountBytes, cache_kernels.h).
struct MissSort {
  const unsigned long long* count = nullptr;
  const unsigned long long* fault_key = nullptr;  // sorts nothing unless ~0 (kNoFaultKey)
  int64_t capacity = 0;
  int64_t num_sets = 0;
  int row_bits = 0;      // bits of the largest linear id
  int set_bits = 0;      // bits of the largest set
  bool by_home = false;  // sort by home order instead
  int64_t* rows[2] = {nullptr, nullptr};
  uint32_t* positions[2] = {nullptr, nullptr};
  uint32_t* tile_counts = nullptr;  // 2 x 256 per tile of kMissTile entries
  // A word of device memory, the sort's own; what it leaves there says
  // which way a sort by set of more than kMissTile entries went (tests read
  // it): 0 where it grouped by set alone, 1 where a run outgrew a warp and
  // it went on by set and row; untouched where it sorted by set and row at
  // once (more than 4 entries a set).
  unsigned long long* long_runs = nullptr;
};

// Sorts buffer 0's entries (one launch, on the current device); they end in
// buffer 0, and buffer 1 holds nothing of use.
void SortMissesCuda(const MissSort& sort, const char* op, cudaStream_t stream);

}  // namespace ember::cache::internal::cuda
