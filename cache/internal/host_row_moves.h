#pragma once

// The host's half of a mapped home's copy-engine fills (move_rows_cuda.cu,
// CopyEngineFills). A GPU reading random rows of host-mapped memory with
// its SMs slows every kernel beside it (3.4x for SGEMMs on an H100,
// docs/benchmarks.md, "What the rows' moves cost the step beside them");
// a copy engine moving the same rows costs them nothing. So a prefetch may
// instead have host threads gather its new rows from home into pinned
// memory, copy those in with one copy and scatter them into their slots
// with a kernel. Its evicted rows still go home by the warps' stores,
// beside the gather: stores are posted, and carrying the evicted rows
// through the host as well made the step slower, not faster
// (docs/benchmarks.md, "Copy-engine fills").
//
// Thread safety: MoveRowsOnHost reads home rows and writes `fill_data`;
// its caller owns both for the call (the prefetch's vars).

#include <cstdint>
#include <memory>
#include <vector>

#include "cache/internal/cache_args.h"

namespace ember::cache::internal {

// host_copy_threads.h: the CUDA sources that include this header need
// only the name.
class HostCopyThreads;

// A cache's means for copy-engine fills (CacheArgs::host_fills), made with
// the cache: the cache's arguments with host pointers (its home, which is
// host memory, and its per-table arrays), pinned memory for one prefetch's
// list and rows (HostFillBuffers: the staging's rows, SlotBytes each),
// the threads, and the rows they brought in (CacheStats::
// copy_engine_fills). Written by prefetches, read after them (the cache's
// state var orders both).
struct HostFills {
  CacheArgs cache;
  std::vector<int64_t> table_arrays;  // what cache's per-table arrays point into
  void* pinned = nullptr;             // HostFillBytes(cache)
  std::unique_ptr<HostCopyThreads> threads;
  int64_t last_fills = 0;   // the last prefetch's
  int64_t total_fills = 0;  // since the cache was made
};

// The pieces of HostFills::pinned: a header the GPU copies its prefetch's
// counts into, then staging_capacity entries of the new rows' list and
// rows of their data: fill_rows[i]'s home row goes to row i of fill_data,
// rows SlotBytes apart, each RowBytes of its table.
inline constexpr int64_t kHostFillHeaderBytes = 4096;
struct HostFillBuffers {
  void* header = nullptr;
  int64_t* fill_rows = nullptr;
  char* fill_data = nullptr;
};
int64_t HostFillBytes(const CacheArgs& cache);
HostFillBuffers CarveHostFills(const HostFills& fills);

// Gathers the first `fills` rows of `buffers`' list into its data, split
// over `threads`. `cache` holds host pointers: its home and its per-table
// arrays (rows, dims, offsets).
void MoveRowsOnHost(const CacheArgs& cache, const HostFillBuffers& buffers, int64_t fills,
                    HostCopyThreads& threads);

}  // namespace ember::cache::internal
