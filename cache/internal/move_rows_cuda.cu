// MovePassRows and FinishMoves (move_rows_cuda.cuh).
//
// The copies are warp-wide: a warp keeps kRowsInFlight rows in flight, so
// that with every resident warp doing so, reads of host memory cover the
// link's latency. On an H100 the link carries GPU loads from host memory
// at about 54 GB/s and stores at 52, and both at once at about 41 each way
// (docs/benchmarks.md, "Write-back staging"): a fill that evicts a row
// moves at the link's pace only while the write-backs run beside it, which
// is what the staging is for.

#include "cache/internal/move_rows_cuda.cuh"

#include <cub/block/block_scan.cuh>

#include <algorithm>
#include <cstdint>

#include "engine/cuda/check.h"

namespace ember::cache::internal::cuda {
namespace {

constexpr int kRowsInFlight = 4;

// A lane's row to copy: `bytes` (0: none) from `from` to `to`.
struct RowCopy {
  const char* from = nullptr;
  char* to = nullptr;
  int64_t bytes = 0;
};

// Whether both addresses and the size are multiples of 16 bytes.
__device__ bool IsWide(const RowCopy& c) {
  const auto bits = reinterpret_cast<uintptr_t>(c.from) | reinterpret_cast<uintptr_t>(c.to) |
                    static_cast<uintptr_t>(c.bytes);
  return bits % 16 == 0;
}

// Lane u's value of a pointer, for every lane.
template <typename T>
__device__ T* ShflPointer(T* p, int u) {
  const auto bits = static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(p));
  return reinterpret_cast<T*>(static_cast<uintptr_t>(__shfl_sync(kFullMask, bits, u)));
}

// The copies of lanes 0 .. kCopies - 1, with the whole warp: in 16-byte
// words, every row's loads issued before any store, where all are 16-byte
// aligned; otherwise one row at a time (WarpCopy) in lane order. Either way
// a copy reads its source before any later lane's copy writes it.
template <int kCopies>
__device__ void WarpCopyRows(const RowCopy& mine) {
  if (!__all_sync(kFullMask, IsWide(mine))) {
    for (int u = 0; u < kCopies; ++u) {
      WarpCopy(ShflPointer(mine.from, u), ShflPointer(mine.to, u),
               __shfl_sync(kFullMask, mine.bytes, u));
      // Read out before the next copy writes: its lanes may split the row
      // into words of another size.
      __syncwarp();
    }
    return;
  }
  // 16-byte words of the longest row (a row's words fit 32 bits: a set of
  // 32 rows lives in GPU memory).
  const int64_t words = __reduce_max_sync(kFullMask, static_cast<unsigned>(mine.bytes / 16));
  for (int64_t base = 0; base < words; base += kWarp) {  // every lane, for the shuffles
    const int64_t at = (base + Lane()) * 16;
    int4 word[kCopies];
#pragma unroll
    for (int u = 0; u < kCopies; ++u) {
      const char* from = ShflPointer(mine.from, u);
      if (at < __shfl_sync(kFullMask, mine.bytes, u)) {
        word[u] = *reinterpret_cast<const int4*>(from + at);
      }
    }
#pragma unroll
    for (int u = 0; u < kCopies; ++u) {
      char* to = ShflPointer(mine.to, u);
      if (at < __shfl_sync(kFullMask, mine.bytes, u)) *reinterpret_cast<int4*>(to + at) = word[u];
    }
  }
}

__device__ char* StagedRowAt(const CacheArgs& cache, int64_t g) {
  return static_cast<char*>(cache.staging) + g * cache.slot_dim * ElementBytes(cache.row_type);
}

// Row `row`'s copy between its home row and `other` (into home when
// `to_home`); none for an empty way.
__device__ RowCopy HomeCopy(const CacheArgs& cache, int64_t row, char* other, bool to_home) {
  RowCopy copy;
  if (row == kEmpty) return copy;
  const int table = TableOf(cache, row);
  char* home = HomeRowAt(cache, table, row);
  copy.from = to_home ? other : home;
  copy.to = to_home ? home : other;
  copy.bytes = RowBytes(cache, table);
  return copy;
}

// The kernels' loop: a warp takes kRowsInFlight entries of [0, count) at a
// time, lane l entry first + l % kRowsInFlight; `copy` gives an entry's
// copy, for lanes 0 .. kCopies - 1.
template <int kCopies, typename CopyOf>
__device__ void ForEachWarpCopy(int64_t count, int64_t warp, int64_t warps, CopyOf copy_of) {
  for (int64_t first = warp * kRowsInFlight; first < count; first += warps * kRowsInFlight) {
    const int64_t f = first + Lane() % kRowsInFlight;
    const bool mine = Lane() < kCopies && f < count;
    WarpCopyRows<kCopies>(copy_of(f, mine));
  }
}

__device__ int64_t WarpOfGrid() { return int64_t{blockIdx.x} * kBlockWarps + threadIdx.x / kWarp; }
__device__ int64_t WarpsOfGrid() { return int64_t{gridDim.x} * kBlockWarps; }

// A managed home's pass: lanes 0.. write the moves' evicted rows home,
// lanes kRowsInFlight.. fill their slots. Moves are of distinct slots, and
// an evicted row (cached) is never a new row (missing), so no two copies
// touch the same bytes.
__global__ void __launch_bounds__(kBlockThreads, 4)
    MoveKernel(const CacheArgs cache, const Moves moves, const unsigned long long* fault_key) {
  if (*fault_key != kNoFaultKey) return;
  const bool fills = Lane() >= kRowsInFlight;
  ForEachWarpCopy<2 * kRowsInFlight>(static_cast<int64_t>(*moves.count), WarpOfGrid(),
                                     WarpsOfGrid(), [&](int64_t f, bool mine) {
                                       if (!mine) return RowCopy{};
                                       const int64_t slot = moves.slots[f];
                                       const int64_t row = fills ? cache.tags[slot] : moves.rows[f];
                                       return HomeCopy(cache, row, SlotRowAt(cache, slot), !fills);
                                     });
}

// The highest HomeBin whose rows may take the staging: the staging's room
// left at the pass's start holds every evicted row of the bins below it.
// A block's threads (kBlockThreads, one per bin) all call it.
__device__ int StagingCutoff(const MoveCounts& counts, int64_t staging_capacity) {
  using Scan = cub::BlockScan<unsigned long long, kBlockThreads>;
  __shared__ typename Scan::TempStorage scan;
  __shared__ int cutoff;
  const auto room = static_cast<unsigned long long>(staging_capacity) - counts.staged_before;
  const unsigned long long in_bin =
      threadIdx.x < kHomeBins ? counts.evicted_in_bin[threadIdx.x] : 0;
  unsigned long long through = 0;  // evicted rows of bins 0 .. this one
  Scan(scan).InclusiveSum(in_bin, through);
  if (threadIdx.x == 0) cutoff = kHomeBins - 1;
  __syncthreads();
  if (threadIdx.x < kHomeBins && through > room) atomicMin(&cutoff, static_cast<int>(threadIdx.x));
  __syncthreads();
  return cutoff;
}

// A mapped home's pass: each evicted row out of its slot into the next
// staging row while there is one (listed with its row for the way home),
// else listed in `overflow` for the way home in home order. Where the
// staging may overflow, the rows of bins above StagingCutoff go home.
__global__ void __launch_bounds__(kBlockThreads, 4)
    StageKernel(const CacheArgs cache, const Moves moves, const Moves overflow, MoveCounts* counts,
                const unsigned long long* fault_key) {
  if (*fault_key != kNoFaultKey) return;
  const bool bins = moves.evicted_in_bin != nullptr;
  const int cutoff = bins ? StagingCutoff(*counts, cache.staging_capacity) : kHomeBins;
  ForEachWarpCopy<kRowsInFlight>(
      static_cast<int64_t>(*moves.count), WarpOfGrid(), WarpsOfGrid(), [&](int64_t f, bool mine) {
        const int64_t row = mine ? moves.rows[f] : kEmpty;
        const auto slot = mine ? moves.slots[f] : 0u;
        const bool evicts = row != kEmpty;
        const bool may_stage = evicts && cache.staging_capacity > 0 &&
                               (!bins || HomeBin(row, moves.row_bits) <= cutoff);
        const auto g = static_cast<int64_t>(WarpReserve(&counts->staged, may_stage));
        const bool stages = may_stage && g < cache.staging_capacity;
        const unsigned long long o = WarpReserve(overflow.count, evicts && !stages);
        if (evicts && !stages) {
          overflow.rows[o] = row;
          overflow.slots[o] = slot;
        }
        if (!stages) return RowCopy{};
        cache.staged_rows[0][g] = row;
        cache.staged_at[0][g] = static_cast<uint32_t>(g);
        RowCopy copy;
        copy.from = SlotRowAt(cache, slot);
        copy.to = StagedRowAt(cache, g);
        copy.bytes = RowBytes(cache, TableOf(cache, row));
        return copy;
      });
}

// The evicted rows the staging had no room for, written home from their
// slots.
__global__ void __launch_bounds__(kBlockThreads, 4)
    WriteBackKernel(const CacheArgs cache, const Moves overflow,
                    const unsigned long long* fault_key) {
  if (*fault_key != kNoFaultKey) return;
  ForEachWarpCopy<kRowsInFlight>(static_cast<int64_t>(*overflow.count), WarpOfGrid(), WarpsOfGrid(),
                                 [&](int64_t f, bool mine) {
                                   if (!mine) return RowCopy{};
                                   return HomeCopy(cache, overflow.rows[f],
                                                   SlotRowAt(cache, overflow.slots[f]), true);
                                 });
}

// Piece `piece` of the deferred fills (`capacity` entries a piece): its
// count, and its entries as (new row, slot) into buffer 0 of `sort`, for
// the sort into home order. The first piece also clamps the staged count
// to the staging's capacity.
__global__ void PieceKernel(const CacheArgs cache, const uint32_t* fills, MoveCounts* counts,
                            MissSort sort, int64_t piece) {
  if (*sort.fault_key != kNoFaultKey) return;
  const int64_t first = piece * sort.capacity;
  const int64_t left = static_cast<int64_t>(counts->fills) - first;
  const int64_t count = left < 0 ? 0 : (left < sort.capacity ? left : sort.capacity);
  const int64_t i0 = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i0 == 0) {
    counts->piece = static_cast<unsigned long long>(count);
    const auto capacity = static_cast<unsigned long long>(cache.staging_capacity);
    if (piece == 0 && counts->staged > capacity) counts->staged = capacity;
  }
  for (int64_t i = i0; i < count; i += int64_t{gridDim.x} * blockDim.x) {
    const uint32_t slot = fills[first + i];
    sort.rows[0][i] = cache.tags[slot];
    sort.positions[0][i] = slot;
  }
}

// The staged rows, sorted into home order.
struct Staged {
  const int64_t* rows = nullptr;
  const uint32_t* at = nullptr;
  const unsigned long long* count = nullptr;
};

// The staging row of `row` when it is staged, else -1: a binary search for
// its home key, then a walk of the key's few rows.
__device__ int64_t FindStaged(const Staged& staged, int64_t row, int row_bits) {
  const uint64_t key = HomeKey(row, row_bits);
  int64_t lo = 0;
  int64_t hi = static_cast<int64_t>(*staged.count);
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (HomeKey(staged.rows[mid], row_bits) < key) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  for (const auto count = static_cast<int64_t>(*staged.count);
       lo < count && HomeKey(staged.rows[lo], row_bits) == key; ++lo) {
    if (staged.rows[lo] == row) return staged.at[lo];
  }
  return -1;
}

// A piece of the deferred fills (sorted in `fills`) copied in, by every
// warp, or (`drains`) by the even warps while the odd ones write the staged
// rows home: both directions of the link at once. `search_staged`: a fill
// may be of a row an earlier pass staged (passes > 1).
__global__ void __launch_bounds__(kBlockThreads, 4)
    FillKernel(const CacheArgs cache, const int64_t* fill_rows, const uint32_t* fill_slots,
               const unsigned long long* fill_count, const Staged staged, bool drains,
               bool search_staged, int row_bits, const unsigned long long* fault_key) {
  if (*fault_key != kNoFaultKey) return;
  const int64_t any_warp = WarpOfGrid();
  const bool drainer = drains && any_warp % 2 == 1;
  const int64_t warp = drains ? any_warp / 2 : any_warp;
  const int64_t warps = drains ? WarpsOfGrid() / 2 : WarpsOfGrid();
  if (drainer) {
    ForEachWarpCopy<kRowsInFlight>(
        static_cast<int64_t>(*staged.count), warp, warps, [&](int64_t f, bool mine) {
          if (!mine) return RowCopy{};
          return HomeCopy(cache, staged.rows[f], StagedRowAt(cache, staged.at[f]), true);
        });
    return;
  }
  ForEachWarpCopy<kRowsInFlight>(
      static_cast<int64_t>(*fill_count), warp, warps, [&](int64_t f, bool mine) {
        if (!mine) return RowCopy{};
        const int64_t row = fill_rows[f];
        char* cached = SlotRowAt(cache, fill_slots[f]);
        const int64_t g = search_staged ? FindStaged(staged, row, row_bits) : -1;
        if (g < 0) return HomeCopy(cache, row, cached, false);
        RowCopy copy;
        copy.from = StagedRowAt(cache, g);
        copy.to = cached;
        copy.bytes = RowBytes(cache, TableOf(cache, row));
        return copy;
      });
}

// `sort` over buffers `from` and the other, by home order; returns the
// buffer that holds the result.
int SortByHome(MissSort sort, int64_t* const rows[2], uint32_t* const positions[2], int from,
               const unsigned long long* count, int64_t capacity, const char* op,
               cudaStream_t stream) {
  sort.by_home = true;
  sort.count = count;
  sort.capacity = capacity;
  for (int b = 0; b < 2; ++b) {
    sort.rows[b] = rows[(from + b) % 2];
    sort.positions[b] = positions[(from + b) % 2];
  }
  return (from + SortMissesCuda(sort, op, stream)) % 2;
}

// Blocks of the copy kernels for `entries` (half of FillKernel's): 32
// entries a block, enough to keep the link busy.
unsigned CopyGrid(int64_t entries) { return GridFor(entries, kBlockWarps * kRowsInFlight, 2048); }

// Whether a prefetch's evictions may outnumber the staging's rows.
bool MayOverflow(const CacheArgs& cache, const RowMoves& moves) {
  return cache.staging_capacity < moves.fill_capacity;
}

}  // namespace

Moves PassMoves(const CacheArgs& cache, const RowMoves& moves, int at) {
  Moves listed{&moves.counts->moves, moves.sort.rows[at], moves.sort.positions[at]};
  if (moves.fill_capacity == 0) return listed;
  listed.fill_count = &moves.counts->fills;
  listed.fills = moves.fills;
  if (MayOverflow(cache, moves)) listed.evicted_in_bin = moves.counts->evicted_in_bin;
  listed.row_bits = moves.sort.row_bits;
  return listed;
}

void MovePassRows(const CacheArgs& cache, const RowMoves& moves, int at, const char* op,
                  cudaStream_t stream) {
  const MissSort& sort = moves.sort;
  if (moves.fill_capacity == 0) {
    MoveKernel<<<CopyGrid(sort.capacity), kBlockThreads, 0, stream>>>(
        cache, PassMoves(cache, moves, at), sort.fault_key);
    CudaCheckLaunch("MoveKernel", op);
    return;
  }
  const int free = 1 - at;
  StageKernel<<<CopyGrid(sort.capacity), kBlockThreads, 0, stream>>>(
      cache, PassMoves(cache, moves, at),
      Moves{&moves.counts->overflow, sort.rows[free], sort.positions[free]}, moves.counts,
      sort.fault_key);
  CudaCheckLaunch("StageKernel", op);
  // Rows written home from their slots go in home order; when the staging
  // holds every row a prefetch can evict, none does.
  if (!MayOverflow(cache, moves)) return;
  const int b = SortByHome(sort, sort.rows, sort.positions, free, &moves.counts->overflow,
                           sort.capacity, op, stream);
  WriteBackKernel<<<CopyGrid(sort.capacity), kBlockThreads, 0, stream>>>(
      cache, Moves{&moves.counts->overflow, sort.rows[b], sort.positions[b]}, sort.fault_key);
  CudaCheckLaunch("WriteBackKernel", op);
}

void FinishMoves(const CacheArgs& cache, const RowMoves& moves, const char* op,
                 cudaStream_t stream) {
  if (moves.fill_capacity == 0) return;
  const MissSort& sort = moves.sort;
  const int64_t pieces = (moves.fill_capacity + sort.capacity - 1) / sort.capacity;
  Staged staged;
  staged.count = &moves.counts->staged;
  for (int64_t piece = 0; piece < pieces; ++piece) {
    PieceKernel<<<GridFor(sort.capacity, kBlockThreads, 1024), kBlockThreads, 0, stream>>>(
        cache, moves.fills, moves.counts, sort, piece);
    CudaCheckLaunch("PieceKernel", op);
    const bool drains = piece == 0 && cache.staging_capacity > 0;
    if (drains) {
      const int b = SortByHome(sort, cache.staged_rows, cache.staged_at, 0, staged.count,
                               cache.staging_capacity, op, stream);
      staged.rows = cache.staged_rows[b];
      staged.at = cache.staged_at[b];
    }
    const int b = SortByHome(sort, sort.rows, sort.positions, 0, &moves.counts->piece,
                             sort.capacity, op, stream);
    FillKernel<<<2 * CopyGrid(sort.capacity), kBlockThreads, 0, stream>>>(
        cache, sort.rows[b], sort.positions[b], &moves.counts->piece, staged, drains,
        moves.passes > 1 && staged.rows != nullptr, sort.row_bits, sort.fault_key);
    CudaCheckLaunch("FillKernel", op);
  }
}

}  // namespace ember::cache::internal::cuda
