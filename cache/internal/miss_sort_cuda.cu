// SortMissesCuda (miss_sort.h): a prefetch pass's misses grouped by set,
// so that each set's missing rows form one run, which the insert walks in
// increasing linear id (cache_args.h, invariant 4): sorted by (set, row), or
// by set alone where there are at most 4 misses a set and no set has more
// than 31 (the insert's warp then orders each run itself, and the sort takes
// only the set's digits: two for 2^16 sets, where set and row took five); or
// its moves in home order (by_home), so that the rows the moves read at once lie close
// together in host memory: read at random, 512-byte rows of 2 GiB of
// host-mapped memory came at 32 GB/s on an H100, those of 1 GiB at 51 (the
// GPU's address translation reach; ember-bench-cache --h2d_mib).
//
// Why not cub::DeviceRadixSort: the number of misses is known only on the
// GPU (the probe counts them), and CUB's device-wide sorts take their size
// from the host, which would cost a host sync per pass or a sort of every
// index. Here one kernel reads the count from device memory and works in
// proportion to it, so a pass of few misses sorts few, and a pass of none
// costs one launch:
//  - up to kMissTile misses (the usual case): block 0 sorts them with
//    cub::BlockMergeSort on the full key;
//  - more: a least-significant-digit radix sort with CUB's block primitives,
//    8 bits a pass over the set, then (where a run is long) over the
//    composite key (set << row_bits) | row (whose set bits are computed,
//    not stored, so any widths fit), or over the row's top 16 bits: per
//    tile of
//    kMissTile entries a digit histogram; block 0 scans them into each
//    (digit, tile)'s first output position; then each tile ranks its
//    entries by digit with cub::BlockRadixSort (stable), scatters them and
//    counts them by the next digit into their output tiles' histograms.
//    Stability across passes makes the whole sort correct. The steps
//    of every pass are separated by grid-wide barriers, so the kernel is a
//    cooperative launch (all its blocks resident at once; blocks take
//    tiles in turn), of at most one block per SM so that it can start
//    beside the kernels of other streams.

#include <cuda_runtime_api.h>

#include <cooperative_groups.h>
#include <cub/block/block_merge_sort.cuh>
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>

#include <algorithm>
#include <atomic>

#include "cache/internal/cache_cuda.cuh"
#include "cache/internal/miss_sort.h"
#include "engine/cuda/check.h"

namespace ember::cache::internal::cuda {
namespace {

constexpr int kSortThreads = 256;
constexpr int kSortItems = kMissTile / kSortThreads;  // per thread
constexpr int kDigitBits = 8;
constexpr int kDigits = 1 << kDigitBits;
constexpr uint64_t kNoRow = ~0ull;  // sorts after every row
static_assert(kSortItems * kSortThreads == kMissTile);
static_assert(kDigits == kSortThreads, "one thread per digit in the histogram and scan");

// (set, row) order, or home order; kNoRow last.
struct MissOrder {
  int64_t num_sets;
  int home_shift;  // -1: (set, row) order
  __device__ bool operator()(uint64_t a, uint64_t b) const {
    if (a == kNoRow) return false;
    if (b == kNoRow) return true;
    if (home_shift >= 0) return (a >> home_shift) < (b >> home_shift);
    const int64_t set_a = SetOf(static_cast<int64_t>(a), num_sets);
    const int64_t set_b = SetOf(static_cast<int64_t>(b), num_sets);
    return set_a != set_b ? set_a < set_b : a < b;
  }
};

// What a sort's digits are taken from.
enum class SortKey { kSetAndRow, kSet, kHome };

__device__ int DigitsFor(int bits) { return (bits + kDigitBits - 1) / kDigitBits; }

// Digit `pass` (8 bits) of the composite key (set << row_bits) | row, of the
// set alone, or of the home-order key.
__device__ unsigned DigitOf(const MissSort& s, SortKey key, int64_t row, int pass) {
  const int low = pass * kDigitBits;
  const auto r = static_cast<uint64_t>(row);
  if (key == SortKey::kHome) {
    return static_cast<unsigned>((r >> HomeShift(s.row_bits) >> low) & (kDigits - 1));
  }
  if (key == SortKey::kSet) {
    return static_cast<unsigned>((static_cast<uint64_t>(SetOf(row, s.num_sets)) >> low) &
                                 (kDigits - 1));
  }
  unsigned digit = 0;
  if (low < s.row_bits) digit = static_cast<unsigned>((r >> low) & (kDigits - 1));
  if (low + kDigitBits > s.row_bits) {
    const auto set = static_cast<uint64_t>(SetOf(row, s.num_sets));
    const uint64_t part = low >= s.row_bits ? set >> (low - s.row_bits) : set << (s.row_bits - low);
    digit |= static_cast<unsigned>(part & (kDigits - 1));
  }
  return digit;
}

using MergeSort = cub::BlockMergeSort<uint64_t, kSortThreads, kSortItems, uint32_t>;
using RadixSort = cub::BlockRadixSort<uint32_t, kSortThreads, kSortItems, uint32_t>;
using Scan = cub::BlockScan<uint32_t, kSortThreads>;

// One block's shared memory, step by step.
union SortShared {
  typename MergeSort::TempStorage merge;
  unsigned counts[kDigits];
  typename Scan::TempStorage scan;
  struct {
    typename RadixSort::TempStorage sort;
    uint16_t sorted_digits[kMissTile];
    uint32_t digit_start[kDigits];
  } scatter;
};

// Up to kMissTile entries of buffer 0, sorted in place by one block.
__device__ void SortOneTile(const MissSort& s, int64_t count, SortShared& shared) {
  uint64_t keys[kSortItems];
  uint32_t positions[kSortItems];
  for (int i = 0; i < kSortItems; ++i) {
    const int64_t j = int64_t{threadIdx.x} * kSortItems + i;
    keys[i] = j < count ? static_cast<uint64_t>(s.rows[0][j]) : kNoRow;
    positions[i] = j < count ? s.positions[0][j] : 0;
  }
  MergeSort(shared.merge)
      .Sort(keys, positions, MissOrder{s.num_sets, s.by_home ? HomeShift(s.row_bits) : -1},
            static_cast<int>(count), kNoRow);
  for (int i = 0; i < kSortItems; ++i) {
    const int64_t j = int64_t{threadIdx.x} * kSortItems + i;
    if (j < count) {
      s.rows[0][j] = static_cast<int64_t>(keys[i]);
      s.positions[0][j] = positions[i];
    }
  }
}

// One least-significant-digit sort: `passes` digits of `key`, from buffer
// `from` (and, pass by pass, to the other).
struct DigitSort {
  SortKey key;
  int passes;
  int from;
};

// The two tile-count buffers, of `tiles` tiles each: a digit's counts (then
// its positions) in one, the next digit's counts added up in the other.
struct TileCounts {
  uint32_t* of_digit[2];
  __device__ TileCounts(const MissSort& s, int64_t tiles)
      : of_digit{s.tile_counts, s.tile_counts + tiles * kDigits} {}
};

// Tile `tile`'s counts of the first digit: counts.of_digit[0][tile * 256 +
// digit]; and its row of the other buffer zeroed, for the next digit.
__device__ void CountTile(const MissSort& s, const DigitSort& d, int64_t count, int64_t tile,
                          const TileCounts& counts, SortShared& shared) {
  const int64_t first = tile * kMissTile;
  shared.counts[threadIdx.x] = 0;
  __syncthreads();
  for (int i = 0; i < kSortItems; ++i) {
    const int64_t j = first + int64_t{i} * kSortThreads + threadIdx.x;
    if (j < count) atomicAdd(&shared.counts[DigitOf(s, d.key, s.rows[d.from][j], 0)], 1u);
  }
  __syncthreads();
  counts.of_digit[0][tile * kDigits + threadIdx.x] = shared.counts[threadIdx.x];
  counts.of_digit[1][tile * kDigits + threadIdx.x] = 0;
  __syncthreads();
}

// A thread per digit: each (tile, digit) count becomes the first output
// position of that digit's entries of that tile (digit-major, then tile
// order: what makes the scatter stable). A thread reads kScanBatch tiles'
// counts at once, so that a scan waits for a memory round trip per
// kScanBatch tiles instead of one per tile (a pass of a few thousand
// misses has a dozen tiles, and this scan is serial in every digit).
constexpr int kScanBatch = 16;

// A digit's counts of the kScanBatch tiles from `first` (0 past the last).
__device__ void LoadCounts(const uint32_t* tile_counts, int64_t first, int64_t tiles,
                           unsigned digit, uint32_t (&n)[kScanBatch]) {
#pragma unroll
  for (int i = 0; i < kScanBatch; ++i) {
    n[i] = first + i < tiles ? tile_counts[(first + i) * kDigits + digit] : 0;
  }
}

__device__ void ScanTiles(uint32_t* tile_counts, int64_t tiles, SortShared& shared) {
  const unsigned digit = threadIdx.x;
  uint32_t total = 0;
  for (int64_t first = 0; first < tiles; first += kScanBatch) {
    uint32_t n[kScanBatch];
    LoadCounts(tile_counts, first, tiles, digit, n);
#pragma unroll
    for (int i = 0; i < kScanBatch; ++i) total += n[i];
  }
  uint32_t position = 0;
  Scan(shared.scan).ExclusiveSum(total, position);
  for (int64_t first = 0; first < tiles; first += kScanBatch) {
    uint32_t n[kScanBatch];
    LoadCounts(tile_counts, first, tiles, digit, n);
#pragma unroll
    for (int i = 0; i < kScanBatch; ++i) {
      if (first + i < tiles) tile_counts[(first + i) * kDigits + digit] = position;
      position += n[i];
    }
  }
  __syncthreads();
}

// Tile `tile`'s entries of buffer `from`, ranked by digit `pass` (stably)
// and scattered to their positions (`positions`, from ScanTiles) in buffer
// 1 - from. Unless this is the last digit, each entry is counted at once
// by the next digit into its output tile's row of `next` (whose rows are
// zero), which saves a pass over the entries and a grid barrier a digit;
// then the tile's row of `positions` is zeroed, for the digit after next.
__device__ void ScatterTile(const MissSort& s, const DigitSort& d, int64_t count, int64_t tile,
                            int pass, uint32_t* positions, uint32_t* next, SortShared& shared) {
  const int from = (d.from + pass) % 2;
  const int64_t first = tile * kMissTile;
  // Blocked arrangement (thread t holds entries t * kSortItems + i), the
  // order BlockRadixSort keeps among equal digits; kDigits marks no entry.
  uint32_t digits[kSortItems];
  uint32_t local[kSortItems];
  for (int i = 0; i < kSortItems; ++i) {
    const int at = static_cast<int>(threadIdx.x) * kSortItems + i;
    local[i] = static_cast<uint32_t>(at);
    digits[i] = first + at < count ? DigitOf(s, d.key, s.rows[from][first + at], pass) : kDigits;
  }
  RadixSort(shared.scatter.sort).Sort(digits, local, 0, kDigitBits + 1);
  for (int i = 0; i < kSortItems; ++i) {
    shared.scatter.sorted_digits[threadIdx.x * kSortItems + i] = static_cast<uint16_t>(digits[i]);
  }
  __syncthreads();
  for (int i = 0; i < kSortItems; ++i) {
    const int rank = static_cast<int>(threadIdx.x) * kSortItems + i;
    if (digits[i] < kDigits && (rank == 0 || shared.scatter.sorted_digits[rank - 1] != digits[i])) {
      shared.scatter.digit_start[digits[i]] = static_cast<uint32_t>(rank);
    }
  }
  __syncthreads();
  const int to = 1 - from;
  for (int i = 0; i < kSortItems; ++i) {
    if (digits[i] >= kDigits) continue;
    const int rank = static_cast<int>(threadIdx.x) * kSortItems + i;
    const int64_t at = positions[tile * kDigits + digits[i]] +
                       (rank - static_cast<int64_t>(shared.scatter.digit_start[digits[i]]));
    const int64_t row = s.rows[from][first + local[i]];
    s.rows[to][at] = row;
    s.positions[to][at] = s.positions[from][first + local[i]];
    if (pass + 1 < d.passes) {
      atomicAdd(&next[at / kMissTile * kDigits + DigitOf(s, d.key, row, pass + 1)], 1u);
    }
  }
  __syncthreads();
  positions[tile * kDigits + threadIdx.x] = 0;
}

// The digits of `d`, every block taking tiles in turn; returns the buffer
// that holds the result. Its entries must be in place (a grid barrier after
// whatever wrote them).
__device__ int SortByDigits(const MissSort& s, const DigitSort& d, int64_t count,
                            const cooperative_groups::grid_group& grid, SortShared& shared) {
  if (d.passes == 0) return d.from;
  const int64_t tiles = (count + kMissTile - 1) / kMissTile;
  const TileCounts counts(s, tiles);
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    CountTile(s, d, count, tile, counts, shared);
  }
  for (int pass = 0; pass < d.passes; ++pass) {
    uint32_t* positions = counts.of_digit[pass % 2];
    grid.sync();
    if (blockIdx.x == 0) ScanTiles(positions, tiles, shared);
    grid.sync();
    for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
      ScatterTile(s, d, count, tile, pass, positions, counts.of_digit[1 - pass % 2], shared);
    }
  }
  return (d.from + d.passes) % 2;
}

// Whether some set has more than kShortRun entries in buffer `at` (grouped
// by set). Every block calls it, after a grid barrier.
constexpr int kShortRun = kWarp - 1;

__device__ bool SomeRunIsLong(const MissSort& s, int at, int64_t count,
                              const cooperative_groups::grid_group& grid) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t j = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; j + kShortRun < count;
       j += stride) {
    if (SetOf(s.rows[at][j], s.num_sets) == SetOf(s.rows[at][j + kShortRun], s.num_sets)) {
      *s.long_runs = 1;
    }
  }
  grid.sync();
  return *static_cast<volatile unsigned long long*>(s.long_runs) != 0;
}

// The sorted entries of buffer `at` moved to buffer 0, where every path
// leaves them.
__device__ void EndInFirst(const MissSort& s, int at, int64_t count,
                           const cooperative_groups::grid_group& grid) {
  if (at == 0) return;
  grid.sync();
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t j = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; j < count; j += stride) {
    s.rows[0][j] = s.rows[1][j];
    s.positions[0][j] = s.positions[1][j];
  }
}

// A pass's misses are few a set (the hot rows hit), so sorting them by set
// alone (two digits for 2^16 sets, against five for set and row) is enough
// where no set has more than kShortRun of them: the insert's warp orders
// such a run by row itself. A pass of more misses than kShortRunLoad a set
// is sorted by set and row at once.
constexpr int64_t kShortRunLoad = 4;

// The whole sort; a cooperative launch. Every block reads the same count,
// so all of them take the same path (and reach the same barriers), and
// every path leaves the sorted entries in buffer 0 (a copy where it sorted
// an odd number of digits in all).
__global__ void __launch_bounds__(kSortThreads) SortMissesKernel(const MissSort s) {
  __shared__ SortShared shared;
  AwaitPreviousKernel();
  if (*s.fault_key != kNoFaultKey) return;
  const auto count = static_cast<int64_t>(*s.count);
  if (count == 0) return;
  if (count <= kMissTile) {
    if (blockIdx.x == 0) SortOneTile(s, count, shared);
    return;
  }
  const cooperative_groups::grid_group grid = cooperative_groups::this_grid();
  if (s.by_home) {
    const int home_bits = s.row_bits - HomeShift(s.row_bits);
    const int at = SortByDigits(s, {SortKey::kHome, DigitsFor(home_bits), 0}, count, grid, shared);
    return EndInFirst(s, at, count, grid);
  }
  int at = 0;
  if (count <= kShortRunLoad * s.num_sets) {
    if (blockIdx.x == 0 && threadIdx.x == 0) *s.long_runs = 0;  // read after grid barriers
    at = SortByDigits(s, {SortKey::kSet, DigitsFor(s.set_bits), 0}, count, grid, shared);
    grid.sync();
    if (!SomeRunIsLong(s, at, count, grid)) return EndInFirst(s, at, count, grid);
  }
  at = SortByDigits(s, {SortKey::kSetAndRow, DigitsFor(s.row_bits + s.set_bits), at}, count, grid,
                    shared);
  EndInFirst(s, at, count, grid);
}

// Blocks of SortMissesKernel that fit on `device` at once, one per SM at
// most; found once per device.
int ResidentSortBlocks(int device, const char* op) {
  static std::atomic<int> known[64] = {};
  if (device >= 0 && device < 64) {
    if (const int blocks = known[device].load(std::memory_order_relaxed); blocks > 0) return blocks;
  }
  int per_sm = 0;
  CudaCheckForOp(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, SortMissesKernel, kSortThreads, 0),
      "cudaOccupancyMaxActiveBlocksPerMultiprocessor of SortMissesKernel", op);
  int sms = 0;
  CudaCheckForOp(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
                 "cudaDeviceGetAttribute (multiprocessors)", op);
  const int blocks = std::max(1, std::min(per_sm, 1) * sms);
  if (device >= 0 && device < 64) known[device].store(blocks, std::memory_order_relaxed);
  return blocks;
}

}  // namespace

void SortMissesCuda(const MissSort& s, const char* op, cudaStream_t stream) {
  int device = 0;
  CudaCheckForOp(cudaGetDevice(&device), "cudaGetDevice", op);
  const int64_t tiles = (s.capacity + kMissTile - 1) / kMissTile;
  const auto blocks =
      static_cast<unsigned>(std::clamp<int64_t>(tiles, 1, ResidentSortBlocks(device, op)));
  LaunchChainedCooperative("SortMissesKernel", op, SortMissesKernel, blocks, kSortThreads, stream,
                           s);
}

}  // namespace ember::cache::internal::cuda
