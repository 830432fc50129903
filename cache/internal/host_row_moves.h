#pragma once

// The host's half of a mapped home's copy-engine fills (move_rows_cuda.cu,
// CopyEngineFills). A GPU reading random rows of host-mapped memory with
// its SMs slows every kernel beside it (3.4x for SGEMMs on an H100,
// docs/benchmarks.md, "What the rows' moves cost the step beside them");
// a copy engine moving the same rows costs them nothing. So a prefetch may
// instead copy its evicted rows (parked in the GPU's staging) out in one
// copy, have the host write them to their home rows and gather its new
// rows from home into pinned memory, and copy those in with one copy for a
// kernel to scatter into their slots.
//
// Thread safety: MoveRowsOnHost writes the home rows of the evicted rows
// and `fill_data`; its caller owns both for the call (the prefetch's vars).

#include <cstdint>
#include <memory>
#include <vector>

#include "cache/internal/cache_args.h"

namespace ember::cache::internal {

// host_copy_threads.h, kept out of the CUDA sources that include this
// header (nvcc's host pass lacks <barrier>).
class HostCopyThreads;

// One prefetch's rows, in pinned host memory. Rows are slot_bytes apart in
// both data buffers; each copies RowBytes of its table.
struct HostRowMoves {
  int64_t slot_bytes = 0;
  // Evicted rows: staged_rows[i]'s row is staged_data row staged_at[i].
  const int64_t* staged_rows = nullptr;
  const uint32_t* staged_at = nullptr;
  int64_t staged = 0;
  const char* staged_data = nullptr;
  // New rows: fill_rows[i]'s home row goes to fill_data row i.
  const int64_t* fill_rows = nullptr;
  int64_t fills = 0;
  char* fill_data = nullptr;
};

// A cache's means for copy-engine fills (CacheArgs::host_fills), made with
// the cache: the cache's arguments with host pointers (its home, which is
// host memory, and its per-table arrays), pinned memory for one prefetch's
// lists and rows (HostFillBuffers), and the threads.
struct HostFills {
  CacheArgs cache;
  std::vector<int64_t> table_arrays;  // what cache's per-table arrays point into
  void* pinned = nullptr;             // HostFillBytes(capacity, slot_bytes)
  int64_t capacity = 0;               // rows: the staging's
  int64_t slot_bytes = 0;
  std::unique_ptr<HostCopyThreads> threads;
};

// The pieces of HostFills::pinned: a header the GPU copies its prefetch's
// counts into, then `capacity` entries of each list and rows of each data
// buffer (HostRowMoves).
inline constexpr int64_t kHostFillHeaderBytes = 4096;
struct HostFillBuffers {
  void* header = nullptr;
  int64_t* fill_rows = nullptr;
  int64_t* staged_rows = nullptr;
  uint32_t* staged_at = nullptr;
  char* staged_data = nullptr;
  char* fill_data = nullptr;
};
int64_t HostFillBytes(int64_t capacity, int64_t slot_bytes);
HostFillBuffers CarveHostFills(const HostFills& fills);

// Writes every evicted row home and gathers every new row, split over
// `threads`. `cache` holds host pointers: its home and its per-table arrays
// (rows, dims, offsets). The evicted and the new rows are disjoint (one
// pass: the evicted were cached, the new ones missing), so the two run at
// once.
void MoveRowsOnHost(const CacheArgs& cache, const HostRowMoves& moves, HostCopyThreads& threads);

}  // namespace ember::cache::internal
