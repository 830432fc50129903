#pragma once

// Device helpers shared by the cache's CUDA kernels (batch_check_cuda.cu,
// miss_sort_cuda.cu, prefetch_cuda.cu, lookup_cuda.cu, maintenance_cuda.cu),
// their chained launches, and the batch check's host launcher, which they
// share (the miss sort's is in miss_sort.h).
//
// Warp helpers take the whole warp: every lane calls them, converged, with
// its own arguments (a lane without work passes valid = false), as the
// *_sync intrinsics inside them require.
//
// Thread safety: pure functions and launches on the caller's stream.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "cache/internal/batch_fault.h"
#include "cache/internal/cache_args.h"
#include "cache/internal/cache_kernels.h"
#include "cache/internal/cache_rows.h"
#include "cache/internal/miss_sort.h"
#include "engine/cuda/check.h"

namespace ember::cache::internal::cuda {

inline constexpr int kWarp = 32;
inline constexpr unsigned kFullMask = 0xffffffffu;
inline constexpr int kBlockThreads = 256;
inline constexpr int kBlockWarps = kBlockThreads / kWarp;
// A fault key (see CheckBatchCuda) when the batch has no fault.
inline constexpr unsigned long long kNoFaultKey = ~0ull;

inline cudaStream_t AsStream(void* stream) { return static_cast<cudaStream_t>(stream); }

// Blocks of `per_block` items for a grid-stride loop over n items: enough to
// fill the GPU, at least one, capped (the loop covers the rest).
inline unsigned GridFor(int64_t n, int64_t per_block, int64_t cap = 65535) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + per_block - 1) / per_block, 1, cap));
}

// Chained kernels (programmatic dependent launch, sm_90 and later). A step
// is a chain of short kernels on one stream, and most of them return at
// once when nothing missed, so the time from one kernel's end to the next
// one's start is a large share of a step without misses. A kernel launched
// by LaunchChained may be started while the stream's previous kernel still
// runs, when that kernel allows it; so every cache kernel begins with
// AwaitPreviousKernel, which waits until the previous kernel has finished
// and its writes are visible, then allows the next chained kernel to start
// (its blocks wait in turn). Both instructions are no-ops in a kernel
// launched without the attribute, and a launch after anything that is not
// a kernel of this chain (a memset, an event wait, another library's
// kernel) keeps the stream's full order.
__device__ inline void AwaitPreviousKernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// The configuration of a chained launch (see above).
struct ChainedLaunch {
  ChainedLaunch(bool cooperative, unsigned grid, unsigned block, cudaStream_t stream) {
    attributes[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[0].val.programmaticStreamSerializationAllowed = 1;
    attributes[1].id = cudaLaunchAttributeCooperative;
    attributes[1].val.cooperative = 1;
    config.gridDim = dim3(grid);
    config.blockDim = dim3(block);
    config.stream = stream;
    config.attrs = attributes;
    config.numAttrs = cooperative ? 2 : 1;
  }
  ChainedLaunch(const ChainedLaunch&) = delete;  // config points into it
  ChainedLaunch& operator=(const ChainedLaunch&) = delete;

  cudaLaunchAttribute attributes[2] = {};
  cudaLaunchConfig_t config = {};
};

// Launches `kernel` chained to the stream's previous kernel (see above).
// Checked: a failure names `name` and `op`.
template <typename... Params, typename... Args>
void LaunchChained(const char* name, const char* op, void (*kernel)(Params...), unsigned grid,
                   unsigned block, cudaStream_t stream, Args&&... args) {
  const ChainedLaunch launch(/*cooperative=*/false, grid, block, stream);
  CudaCheckForOp(cudaLaunchKernelEx(&launch.config, kernel, std::forward<Args>(args)...), name, op);
}

// The same as cudaLaunchCooperativeKernel does (the grid resident at once).
template <typename... Params, typename... Args>
void LaunchChainedCooperative(const char* name, const char* op, void (*kernel)(Params...),
                              unsigned grid, unsigned block, cudaStream_t stream, Args&&... args) {
  const ChainedLaunch launch(/*cooperative=*/true, grid, block, stream);
  CudaCheckForOp(cudaLaunchKernelEx(&launch.config, kernel, std::forward<Args>(args)...), name, op);
}

__device__ inline int Lane() { return static_cast<int>(threadIdx.x % kWarp); }
__device__ inline unsigned LanesBelow() { return (1u << Lane()) - 1u; }

// The tables that a run of indices may belong to: [first, last].
struct TableSpan {
  int first;
  int last;
};

// The table of index k of a batch (whose offsets are valid: otherwise some
// table of `span`, never out of bounds): the last table of `span` whose
// first bag starts at or before k.
__device__ inline int TableOfIndex(const BatchArgs& batch, TableSpan span, int64_t k) {
  int lo = span.first;
  int hi = span.last;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (OffsetAt(batch, int64_t{mid} * batch.batch_size) <= k) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}
__device__ inline int TableOfIndex(const BatchArgs& batch, int num_tables, int64_t k) {
  return TableOfIndex(batch, TableSpan{0, num_tables - 1}, k);
}

// The tables of the block's indices, the first `items` from `first` that
// are below `end`: found once for the block (by two threads), so that each
// index's own search runs over the tables its block spans, mostly one,
// instead of putting a search through every table's offsets in front of
// each index's row. Every thread of the block calls it, with the same
// arguments.
__device__ inline TableSpan BlockTableSpan(const BatchArgs& batch, int num_tables, int64_t first,
                                           int64_t items, int64_t end) {
  __shared__ int ends[2];
  const int64_t last = (first + items < end ? first + items : end) - 1;
  __syncthreads();  // the block's previous span has been read
  if (threadIdx.x < 2) {
    ends[threadIdx.x] = TableOfIndex(batch, num_tables, threadIdx.x == 0 ? first : last);
  }
  __syncthreads();
  return TableSpan{ends[0], ends[1]};
}

// The linear id of index k (of table `span`'s), or -1 when the index is
// out of its table's range (only an unchecked batch has one).
__device__ inline int64_t LinearIdOf(const CacheArgs& cache, const BatchArgs& batch, TableSpan span,
                                     int64_t k) {
  const int table = TableOfIndex(batch, span, k);
  const int64_t index = IndexAt(batch, k);
  return index >= 0 && index < cache.rows[table] ? cache.row_offsets[table] + index : -1;
}

// Where rows live (cache_args.h, layout).
__device__ inline char* HomeRowAt(const CacheArgs& cache, int table, int64_t linear_id) {
  const int64_t element =
      cache.weight_offsets[table] + (linear_id - cache.row_offsets[table]) * cache.dims[table];
  return static_cast<char*>(cache.home) + element * ElementBytes(cache.row_type);
}
__device__ inline char* SlotRowAt(const CacheArgs& cache, int64_t slot) {
  return static_cast<char*>(cache.slots) + slot * SlotBytes(cache);
}

// Copies `bytes` (a multiple of 2) with the lanes of a warp, in the widest
// words (16, 8, 4 or 2 bytes) that both addresses and the size allow, so
// that a row at home (host-mapped or managed memory) moves in full,
// coalesced transactions. Rows are copied bit for bit, whatever their type.
template <typename Word>
__device__ inline void CopyWords(const void* from, void* to, int64_t bytes) {
  const auto* src = static_cast<const Word*>(from);
  auto* dst = static_cast<Word*>(to);
  const int64_t words = bytes / static_cast<int64_t>(sizeof(Word));
  for (int64_t i = Lane(); i < words; i += kWarp) dst[i] = src[i];
}
__device__ inline void WarpCopy(const void* from, void* to, int64_t bytes) {
  const auto bits = reinterpret_cast<uintptr_t>(from) | reinterpret_cast<uintptr_t>(to) |
                    static_cast<uintptr_t>(bytes);
  if (bits % 16 == 0) {
    CopyWords<int4>(from, to, bytes);
  } else if (bits % 8 == 0) {
    CopyWords<int2>(from, to, bytes);
  } else if (bits % 4 == 0) {
    CopyWords<int>(from, to, bytes);
  } else {
    CopyWords<short>(from, to, bytes);
  }
}

// The slot of each lane's row (linear id) or -1, as FindSlot finds it: row
// by row, the whole warp reads the 32 tags of that row's set (two cache
// lines) in one coalesced load.
__device__ inline int64_t WarpFindSlot(const CacheArgs& cache, int64_t linear_id, bool valid) {
  const int64_t set = valid ? SetOf(linear_id, cache.num_sets) : 0;
  // A row repeated in the warp (a hot row, under Zipf's law often) is
  // looked up once, by the lowest of its lanes, and its slot shared.
  const unsigned peers = __match_any_sync(kFullMask, valid ? linear_id : -1);
  const int leader = __ffs(peers) - 1;
  unsigned pending = __ballot_sync(kFullMask, valid && leader == Lane());
  int64_t found = -1;
  while (pending != 0) {
    const int i = __ffs(pending) - 1;
    pending &= pending - 1;
    const int64_t row = __shfl_sync(kFullMask, linear_id, i);
    const int64_t first = __shfl_sync(kFullMask, set, i) * kWays;
    const unsigned hits = __ballot_sync(kFullMask, cache.tags[first + Lane()] == row);
    if (Lane() == i && hits != 0) found = first + __ffs(hits) - 1;
  }
  return __shfl_sync(kFullMask, found, leader);
}

// Sorts one value a lane across the warp by `less` (a strict weak order):
// lane r ends with the r-th smallest. A bitonic network, 15 exchanges with
// a partner lane; `partner(value, mask)` returns lane ^ mask's value (by
// shuffles). Equal values stay on their sides, so none is lost or doubled.
// With `width` (a power of two) below 32, only lanes [0, width) are sorted
// among themselves, in fewer exchanges.
template <typename T, typename Partner, typename Less>
__device__ inline T WarpSort(T value, Partner partner, Less less, int width = kWarp) {
  const int lane = Lane();
  for (int k = 2; k <= width; k <<= 1) {
    for (int j = k / 2; j > 0; j /= 2) {
      const T other = partner(value, j);
      // The lower lane of a pair keeps the smaller value where this stage
      // sorts ascending (always in the last one), the larger elsewhere.
      const bool keep_smaller = ((lane & j) == 0) == ((lane & k) == 0);
      if (keep_smaller ? less(other, value) : less(value, other)) value = other;
    }
  }
  return value;
}

// The smallest of the warp's values by `less` (a strict weak order), in
// every lane: a butterfly of 5 exchanges; `partner` as for WarpSort.
template <typename T, typename Partner, typename Less>
__device__ inline T WarpMin(T value, Partner partner, Less less) {
  for (int j = 1; j < kWarp; j <<= 1) {
    const T other = partner(value, j);
    if (less(other, value)) value = other;
  }
  return value;
}

// The set's `eligible` ways in victim order (VictimKey; the lanes are the
// set's ways, so a way's slot follows from its lane): lane r returns the
// way taken r-th, for r below popc(eligible); the other lanes return
// ineligible ways. Sorted across the warp (WarpSort), where ranking each way
// against all 32 took 32 rounds of shuffles and compares, and was half of
// the insert kernel's instructions at twelve passes a prefetch. With
// `only_first`, lane 0 returns the first victim (WarpMin): all that a run
// of one row needs.
__device__ inline int WarpVictimOrder(const CacheArgs& cache, const VictimOrder& key,
                                      unsigned eligible, bool only_first = false) {
  struct Way {
    int64_t count;
    int64_t stamp;
    int way;  // kWarp added where the way is not eligible
  };
  const bool lfu = cache.policy == Policy::kLfu;
  const int lane = Lane();
  const Way mine{key.count, key.timestamp, ((eligible >> lane & 1u) == 0 ? kWarp : 0) | lane};
  const auto partner = [lfu](const Way& w, int mask) {
    return Way{lfu ? __shfl_xor_sync(kFullMask, w.count, mask) : w.count,
               __shfl_xor_sync(kFullMask, w.stamp, mask), __shfl_xor_sync(kFullMask, w.way, mask)};
  };
  // Eligible ways first; ties fall to the lower way, as VictimOrder's slot
  // does.
  const auto before = [](const Way& a, const Way& b) {
    if (((a.way ^ b.way) & kWarp) != 0) return (a.way & kWarp) == 0;
    return VictimOrder{a.count, a.stamp, a.way} < VictimOrder{b.count, b.stamp, b.way};
  };
  const Way ordered = only_first ? WarpMin(mine, partner, before) : WarpSort(mine, partner, before);
  return ordered.way & (kWarp - 1);
}

// Adds `value` to a statistic of `table` in this block's tally (cache_args.h:
// a step's kernels count into kStatTallies copies, so that few blocks add
// to the same word, and the step's last kernel sums them into the
// statistics), where statistics are kept.
__device__ inline void AddTally(const CacheArgs& cache, int table, StatField field, int64_t value) {
  if (cache.stat_tallies == nullptr) return;
  const int64_t tally = blockIdx.x % kStatTallies;
  int64_t* word = cache.stat_tallies + (tally * cache.num_tables + table) * kStatFields + field;
  atomicAdd(reinterpret_cast<unsigned long long*>(word), static_cast<unsigned long long>(value));
}

// A statistic a lane counts: `unit` where `pred` holds.
struct StatCount {
  StatField field;
  bool pred;
  int64_t unit = 1;  // the same for every lane of a table
};

// Counts each of `counts` into its field of the lane's table: the lanes of
// a table match once for all the fields, and add with one atomic per table
// and field that they count something in.
template <int N>
__device__ inline void WarpCount(const CacheArgs& cache, int table, const StatCount (&counts)[N]) {
  if (cache.stat_tallies == nullptr) return;
  unsigned counting[N];
  unsigned members = 0;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    counting[i] = __ballot_sync(kFullMask, counts[i].pred);
    members |= counting[i];
  }
  if ((members >> Lane() & 1) == 0) return;
  const unsigned group = __match_any_sync(members, table);
  if (Lane() != __ffs(group) - 1) return;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const int n = __popc(group & counting[i]);
    if (n > 0) AddTally(cache, table, counts[i].field, n * counts[i].unit);
  }
}

// Reserves one entry of a list whose length is `*count` for every lane
// where `pred` holds: one atomic per warp (the order among warps is the
// GPU's). Returns the lane's entry (meaningful only where `pred` holds).
__device__ inline unsigned long long WarpReserve(unsigned long long* count, bool pred) {
  const unsigned mask = __ballot_sync(kFullMask, pred);
  if (mask == 0) return 0;
  const int leader = __ffs(mask) - 1;
  unsigned long long base = 0;
  if (Lane() == leader) base = atomicAdd(count, static_cast<unsigned long long>(__popc(mask)));
  return __shfl_sync(kFullMask, base, leader) + __popc(mask & LanesBelow());
}

// Appends `value` of every lane where `pred` holds to `list`, whose length
// is `*count`.
__device__ inline void WarpAppend(int32_t* list, int64_t* count, bool pred, int32_t value) {
  const unsigned long long at = WarpReserve(reinterpret_cast<unsigned long long*>(count), pred);
  if (pred) list[at] = value;
}

// The batch check of every GPU step that takes a fault record: finds the
// first bad offset or index in the CPU's order (Linearize: every offset
// first, then the indices in order) as the smallest key (the offset's
// position j, or T * B + 1 + the index's position) into `*key` (device
// memory). The step's next kernel calls DescribeFault with the key, and
// it and every later kernel of the step change nothing unless the key is
// kNoFaultKey.
void CheckBatchCuda(const CacheArgs& cache, const BatchArgs& batch, unsigned long long* key,
                    const char* op, cudaStream_t stream);

// One thread: the fault of `key` (from CheckBatchCuda), as Linearize
// reports it, into `*fault` (the step's record in pinned host memory, read
// by its deferred check); nothing for kNoFaultKey.
__device__ inline void DescribeFault(const BatchArgs& batch, int num_tables, const int64_t* rows,
                                     unsigned long long key, BatchFault* fault) {
  if (key == kNoFaultKey) return;
  const int64_t bags = num_tables * batch.batch_size;
  const auto i = static_cast<int64_t>(key);
  BatchFault found;
  if (i <= bags) {
    found = CheckOffset(batch, num_tables, i);
  } else {
    const int64_t k = i - bags - 1;
    const int table = TableOfIndex(batch, num_tables, k);
    // The bag holding k: the last of its table that starts at or before it.
    int64_t lo = 0;
    int64_t hi = batch.batch_size - 1;
    while (lo < hi) {
      const int64_t mid = (lo + hi + 1) / 2;
      if (OffsetAt(batch, table * batch.batch_size + mid) <= k) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    found.kind = kIndexOutOfRange;
    found.table = table;
    found.bag = lo;
    found.position = k;
    found.value = IndexAt(batch, k);
    found.bound = rows[table];
  }
  *fault = found;
}

// Home order's key of a linear id (kHomeKeyBits, cache_kernels.h), and a
// coarser one of kHomeBins spans: the top bits of its row_bits.
__host__ __device__ inline int ShiftToTop(int row_bits, int top_bits) {
  return row_bits > top_bits ? row_bits - top_bits : 0;
}
__host__ __device__ inline int HomeShift(int row_bits) {
  return ShiftToTop(row_bits, kHomeKeyBits);
}
__host__ __device__ inline uint64_t HomeKey(int64_t row, int row_bits) {
  return static_cast<uint64_t>(row) >> HomeShift(row_bits);
}
inline constexpr int kHomeBinBits = 8;
inline constexpr int kHomeBins = 1 << kHomeBinBits;
__host__ __device__ inline int HomeBin(int64_t row, int row_bits) {
  return static_cast<int>(static_cast<uint64_t>(row) >> ShiftToTop(row_bits, kHomeBinBits));
}

}  // namespace ember::cache::internal::cuda
