// PrefetchCuda and PrefetchScratchBytes (cache_kernels.h): PrefetchCpu's
// semantics (cache_cpu.cc) on one stream, without host syncs.
//
// Pipeline, all on `stream`:
//  1. Check the whole batch (CheckBatchCuda): a bad one is described in the
//     fault record (by the next kernel) and every later kernel returns at
//     once, so nothing changes, as the CPU throws before changing anything.
//  2. Zero this step's statistics and the locked count. Kernels count into
//     the statistics' tallies (cache_args.h).
//  3. Per pass over the chunk [begin, end):
//     a. Probe (a warp per 32 indices): each index's linear id (`requested`
//        comes from the offsets, a table at a time); the warp reads each
//        row's set (32 tags, two cache lines) in one load. A hit is taken
//        by the one thread whose atomicCAS moves the slot's timestamp to
//        this timestep (none, when an earlier pass did): it locks the slot,
//        lists it in `locked` and counts the row as unique (and LFU's
//        count). A miss appends its row and position to the miss list.
//     b. Sort only the misses by (set, row) (miss_sort_cuda.cu): one
//        launch, which returns at once when nothing missed.
//     c. Insert (a warp per set run of the sorted misses): the warp ranks
//        the set's eligible ways by VictimKey (WarpVictimRank), walks the
//        run's distinct rows in increasing id, counts each (unique,
//        unique_misses, LFU's count), gives the first ones the victims in
//        order (each slot its new tag, timestamp and lock) and counts the
//        rest as conflict misses; writes the locations of the run's indices
//        and lists each fill (slot, evicted row) as a move. Sets are
//        independent (a row lives in one set; a victim is cached, a miss is
//        not), so warps need no ordering among themselves.
//     d. The rows of the moves (CopyStep): for a host-mapped home, the moves
//        sorted in the evicted rows' home order, the evicted rows staged in
//        device memory (or written home), the moves sorted in the new rows'
//        home order, the new rows copied in while the staged rows go home
//        (four launches); for a managed home, one unsorted kernel both
//        ways. A warp keeps kRowsInFlight moves' rows in flight.
//  4. Sum the statistics' tallies (FinishKernel).
// The result equals PrefetchCpu's in every slot, tag, timestamp, lock,
// location and statistic; only the order of `locked` may differ.
//
// Scratch (one pass of `chunk` indices, reused by every pass): a header
// (fault key, miss and move counts), the miss rows (i64) and positions
// (u32) twice (the radix sort's two buffers; the one the sort leaves free
// holds the moves) and the radix sort's tile counts (1 KiB a tile of
// kMissTile): within PrefetchScratchBytes' 25 bytes an index plus 32.

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "cache/internal/cache_cuda.cuh"
#include "cache/internal/cache_kernels.h"
#include "engine/cuda/check.h"
#include "engine/cuda/scoped_device.h"
#include "engine/error.h"

namespace ember::cache::internal {

using namespace cuda;  // NOLINT(build/namespaces): the helpers of cache_cuda.cuh

namespace {

constexpr char kOp[] = "CachedTbe::Prefetch";

struct Header {
  unsigned long long fault_key;
  // The miss list's length, of even and odd passes: a pass's insert kernel
  // zeroes the next pass's (no launch of its own).
  unsigned long long misses[2];
  // The move list's length: zeroed by each pass's probe.
  unsigned long long moves;
};
static_assert(sizeof(Header) == 32);

// A pass's fills, listed by the insert for the move: per move the slot and
// the row it takes (the evicted row is the slot's tag until the move).
struct Moves {
  unsigned long long* count = nullptr;
  int64_t* rows = nullptr;
  uint32_t* slots = nullptr;
};

struct Scratch {
  Header* header = nullptr;
  int64_t* rows[2] = {nullptr, nullptr};
  uint32_t* positions[2] = {nullptr, nullptr};
  uint32_t* tile_counts = nullptr;
  int64_t bytes = 0;  // used
};

// The scratch's pieces for `chunk` indices from `base` (null: measures).
Scratch Carve(void* base, int64_t chunk) {
  auto* at = static_cast<char*>(base);
  int64_t used = 0;
  auto take = [&](int64_t bytes) {
    char* piece = at == nullptr ? nullptr : at + used;
    used += bytes;
    return piece;
  };
  Scratch s;
  s.header = reinterpret_cast<Header*>(take(sizeof(Header)));
  for (int b = 0; b < 2; ++b) s.rows[b] = reinterpret_cast<int64_t*>(take(8 * chunk));
  for (int b = 0; b < 2; ++b) s.positions[b] = reinterpret_cast<uint32_t*>(take(4 * chunk));
  s.tile_counts = reinterpret_cast<uint32_t*>(take(MissTileCountBytes(chunk)));
  s.bytes = used;
  return s;
}

int BitsFor(int64_t largest) {
  int bits = 0;
  while (bits < 63 && (largest >> bits) != 0) ++bits;
  return bits;
}

// Describes a bad batch (and changes nothing), or starts the step: this
// step's statistics and the locked count zeroed, and the first pass's miss
// count.
__global__ void BeginKernel(const CacheArgs cache, const BatchArgs batch, const LocationArgs where,
                            Header* header, BatchFault* fault) {
  if (header->fault_key != kNoFaultKey) {
    if (threadIdx.x == 0) {
      DescribeFault(batch, cache.num_tables, cache.rows, header->fault_key, fault);
    }
    return;
  }
  const int fields = (cache.num_tables + 1) * kStatFields;
  if (cache.stats_step != nullptr) {
    for (int i = threadIdx.x; i < fields; i += blockDim.x) cache.stats_step[i] = 0;
  }
  if (threadIdx.x == 0) {
    *where.num_locked = 0;
    header->misses[0] = 0;
  }
}

// Block 0: `requested` of each table, the indices of [begin, end) in its
// bags (tables' indices are contiguous: no count per index).
__device__ void CountRequested(const CacheArgs& cache, const BatchArgs& batch, int64_t begin,
                               int64_t end) {
  if (cache.stat_tallies == nullptr) return;
  for (int t = threadIdx.x; t < cache.num_tables; t += blockDim.x) {
    const int64_t first = OffsetAt(batch, t * batch.batch_size);
    const int64_t last = OffsetAt(batch, (t + 1) * batch.batch_size);
    const int64_t in_pass = (last < end ? last : end) - (first > begin ? first : begin);
    if (in_pass <= 0) continue;
    AddTally(cache, t, kRequested, in_pass);
  }
}

// One thread per index of [begin, end), warps of 32 consecutive indices.
__global__ void __launch_bounds__(kBlockThreads)
    ProbeKernel(const CacheArgs cache, const BatchArgs batch, const LocationArgs where,
                int64_t timestep, int64_t begin, int64_t end, unsigned long long* misses,
                Header* header, int64_t* miss_rows, uint32_t* miss_positions) {
  if (header->fault_key != kNoFaultKey) return;
  if (blockIdx.x == 0) {
    CountRequested(cache, batch, begin, end);
    if (threadIdx.x == 0) header->moves = 0;  // the last pass's move has run
  }
  const int64_t k = begin + int64_t{blockIdx.x} * kBlockThreads + threadIdx.x;
  const bool valid = k < end;
  int table = 0;
  int64_t row = 0;
  if (valid) {
    table = TableOfIndex(batch, cache.num_tables, k);
    row = cache.row_offsets[table] + IndexAt(batch, k);
  }
  const int64_t slot = WarpFindSlot(cache, row, valid);
  const bool hit = slot >= 0;
  // The first use of a cached row in this timestep locks its slot; any
  // other (a repeat in this pass, or a row an earlier pass took) finds the
  // timestamp already moved.
  bool first_use = false;
  if (hit) {
    auto* stamp = reinterpret_cast<unsigned long long*>(cache.timestamps + slot);
    const auto now = static_cast<unsigned long long>(timestep);
    const unsigned long long seen = *stamp;
    first_use = seen != now && atomicCAS(stamp, seen, now) == seen;
    where.slot_of[k] = static_cast<int32_t>(slot);
  }
  if (first_use) {
    cache.locks[slot] += 1;
    if (cache.policy == Policy::kLfu) cache.counts[row] += 1;
  }
  WarpCount(cache, first_use, table, kUnique);
  WarpAppend(where.locked, where.num_locked, first_use, static_cast<int32_t>(slot));
  const bool miss = valid && !hit;
  const unsigned missing = __ballot_sync(kFullMask, miss);
  if (missing == 0) return;
  const int leader = __ffs(missing) - 1;
  unsigned long long at = 0;
  if (Lane() == leader) at = atomicAdd(misses, static_cast<unsigned long long>(__popc(missing)));
  at = __shfl_sync(kFullMask, at, leader) + __popc(missing & LanesBelow());
  if (miss) {
    miss_rows[at] = row;
    miss_positions[at] = static_cast<uint32_t>(k - begin);
  }
}

// The misses of set `set`, sorted entries [start, ...) of rows/positions.
// `ways_by_rank` is the warp's own 32 bytes of shared memory.
__device__ void InsertRun(const CacheArgs& cache, const LocationArgs& where, const Moves& moves,
                          int64_t timestep, int64_t begin, const int64_t* rows,
                          const uint32_t* positions, int64_t count, int64_t start, int64_t set,
                          int8_t* ways_by_rank) {
  const int lane = Lane();
  // The set's ways: which may be victims, and in which order (invariant 4).
  const int64_t way_slot = set * kWays + lane;
  const int64_t tag = cache.tags[way_slot];
  const bool eligible = cache.locks[way_slot] == 0 && cache.timestamps[way_slot] < timestep;
  const unsigned eligible_ways = __ballot_sync(kFullMask, eligible);
  const int victims = __popc(eligible_ways);
  const int rank = WarpVictimRank(cache, VictimKey(cache, way_slot), eligible_ways);
  if (eligible) ways_by_rank[rank] = static_cast<int8_t>(lane);
  __syncwarp();
  const int way_of_rank = lane < victims ? ways_by_rank[lane] : 0;  // the way taken lane-th
  __syncwarp();  // read before the warp's next run writes

  int64_t distinct = 0;  // distinct rows of the run before this window
  for (int64_t window = start;; window += kWarp) {
    const int64_t j = window + lane;
    const int64_t row = j < count ? rows[j] : -1;
    const bool in_run = j < count && SetOf(row, cache.num_sets) == set;
    const unsigned run = __ballot_sync(kFullMask, in_run);  // lanes 0.. (entries are sorted)
    if (run == 0) break;
    const bool head = in_run && (j == start || rows[j - 1] != row);
    const unsigned heads = __ballot_sync(kFullMask, head);
    // The row's rank among the run's distinct rows (shared by its repeats).
    const int64_t row_rank = distinct + __popc(heads & (LanesBelow() | (1u << lane))) - 1;
    const bool inserted = in_run && row_rank < victims;
    const int way = __shfl_sync(kFullMask, way_of_rank, inserted ? static_cast<int>(row_rank) : 0);
    const int64_t slot = inserted ? set * kWays + way : kMiss;
    const int64_t evicted = __shfl_sync(kFullMask, tag, way);  // the way's row before this pass
    const bool fills = head && inserted;
    const bool evicts = fills && evicted != kEmpty;
    const int table = head ? TableOf(cache, row) : 0;
    const int evicted_table = evicts ? TableOf(cache, evicted) : 0;
    if (head && cache.policy == Policy::kLfu) cache.counts[row] += 1;
    WarpCount(cache, head, table, kUnique);
    WarpCount(cache, head, table, kUniqueMisses);
    WarpCount(cache, head && !inserted, table, kConflictMisses);
    WarpCount(cache, fills, table, kInserted);
    WarpCount(cache, fills, table, kBytesToCache, fills ? RowBytes(cache, table) : 0);
    WarpCount(cache, evicts, evicted_table, kEvicted);
    WarpCount(cache, evicts, evicted_table, kBytesToHome,
              evicts ? RowBytes(cache, evicted_table) : 0);
    const unsigned filling = __ballot_sync(kFullMask, fills);
    if (filling != 0) {
      const int leader = __ffs(filling) - 1;
      unsigned long long at = 0;
      if (Lane() == leader) at = atomicAdd(moves.count, __popc(filling));
      at = __shfl_sync(kFullMask, at, leader) + __popc(filling & LanesBelow());
      if (fills) {
        moves.rows[at] = evicted;  // kEmpty when the way was empty
        moves.slots[at] = static_cast<uint32_t>(slot);
      }
    }
    if (fills) {
      cache.tags[slot] = row;
      cache.timestamps[slot] = timestep;
      cache.locks[slot] = 1;
    }
    WarpAppend(where.locked, where.num_locked, fills, static_cast<int32_t>(slot));
    if (in_run) where.slot_of[begin + positions[j]] = static_cast<int32_t>(slot);
    distinct += __popc(heads);
    if (run != kFullMask) break;
  }
}

// Warps take windows of 32 sorted misses and insert every set run that
// starts in theirs (a run may go on past it).
__global__ void __launch_bounds__(kBlockThreads, 2)
    InsertKernel(const CacheArgs cache, const LocationArgs where, const Moves moves,
                 int64_t timestep, int64_t begin, const unsigned long long* misses,
                 unsigned long long* next_misses, const Header* header, const int64_t* rows,
                 const uint32_t* positions) {
  __shared__ int8_t ways_by_rank[kBlockWarps][kWays];
  if (header->fault_key != kNoFaultKey) return;
  if (blockIdx.x == 0 && threadIdx.x == 0) *next_misses = 0;
  const auto count = static_cast<int64_t>(*misses);
  const int64_t windows = (count + kWarp - 1) / kWarp;
  const int64_t warps = int64_t{gridDim.x} * kBlockWarps;
  for (int64_t w = int64_t{blockIdx.x} * kBlockWarps + threadIdx.x / kWarp; w < windows;
       w += warps) {
    const int64_t j = w * kWarp + Lane();
    const int64_t set = j < count ? SetOf(rows[j], cache.num_sets) : -1;
    const bool starts = j < count && (j == 0 || SetOf(rows[j - 1], cache.num_sets) != set);
    for (unsigned heads = __ballot_sync(kFullMask, starts); heads != 0; heads &= heads - 1) {
      const int h = __ffs(heads) - 1;
      InsertRun(cache, where, moves, timestep, begin, rows, positions, count, w * kWarp + h,
                __shfl_sync(kFullMask, set, h), ways_by_rank[threadIdx.x / kWarp]);
    }
  }
}

// Rows a warp keeps in flight: with every resident warp holding this many,
// reads of host memory cover the link's latency.
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

// How a pass's rows move. A host-mapped home is read and written through
// small address translations: its rows move in home order, one order per
// direction (the moves sorted by evicted row for the write-backs, then by
// new row for the fills), and every slot is read out before it is filled:
// kStage copies the first staging_capacity evicted rows into device memory
// (CacheArgs::staging) and writes the rest home; then kFillAndDrain fills
// the slots with half its warps while the other half writes the staged rows
// home: both directions at once. Without staging (capacity 0) the same two
// kernels write every evicted row home, then fill.
// A managed home is mapped in large pages: both directions at once in one
// kernel, unsorted (kMove).
enum class CopyStep { kStage, kFillAndDrain, kMove };

__device__ inline char* StagedRowAt(const CacheArgs& cache, int64_t f) {
  return static_cast<char*>(cache.staging) + f * cache.slot_dim * ElementBytes(cache.row_type);
}

// Move f's copy: its slot's evicted row out (home, or staging row f) or
// its new row in; none for an empty way.
template <CopyStep kStep>
__device__ RowCopy MoveCopy(const CacheArgs& cache, int64_t slot, int64_t row, bool fills,
                            int64_t f) {
  RowCopy copy;
  if (row == kEmpty) return copy;
  const int table = TableOf(cache, row);
  char* home = HomeRowAt(cache, table, row);
  char* cached = SlotRowAt(cache, slot);
  if (kStep == CopyStep::kStage && f < cache.staging_capacity) home = StagedRowAt(cache, f);
  copy.from = fills ? home : cached;
  copy.to = fills ? cached : home;
  copy.bytes = RowBytes(cache, table);
  return copy;
}

// Staged row f's way home (kFillAndDrain's other half).
__device__ RowCopy DrainCopy(const CacheArgs& cache, int64_t f) {
  RowCopy copy;
  const int64_t row = cache.staged_rows[f];
  if (row == kEmpty) return copy;
  const int table = TableOf(cache, row);
  copy.from = StagedRowAt(cache, f);
  copy.to = HomeRowAt(cache, table, row);
  copy.bytes = RowBytes(cache, table);
  return copy;
}

// Warps take kRowsInFlight moves at a time (kMove: lanes 0.. write the
// moves' evicted rows back, lanes kRowsInFlight.. fill their slots;
// kFillAndDrain: even warps fill, odd warps drain the staging). Moves are of
// distinct slots, and an evicted row (cached) is never a new row (missing),
// so no two moves touch the same bytes. kStage leaves each move's new row
// (its slot's tag) in place of the evicted one, for the fill's sort.
template <CopyStep kStep>
__global__ void __launch_bounds__(kBlockThreads, 4)
    CopyRowsKernel(const CacheArgs cache, const Moves moves, const Header* header) {
  constexpr int kCopies = kStep == CopyStep::kMove ? 2 * kRowsInFlight : kRowsInFlight;
  constexpr bool kHalves = kStep == CopyStep::kFillAndDrain;
  if (header->fault_key != kNoFaultKey) return;
  const auto moved = static_cast<int64_t>(*moves.count);
  const int64_t all_warps = int64_t{gridDim.x} * kBlockWarps;
  const int64_t any_warp = int64_t{blockIdx.x} * kBlockWarps + threadIdx.x / kWarp;
  const bool drains = kHalves && any_warp % 2 == 1;
  const int64_t warps = kHalves ? all_warps / 2 : all_warps;
  const int64_t warp = kHalves ? any_warp / 2 : any_warp;
  const int64_t count = drains && cache.staging_capacity < moved ? cache.staging_capacity : moved;
  const bool fills = (kHalves && !drains) || (kStep == CopyStep::kMove && Lane() >= kRowsInFlight);
  for (int64_t first = warp * kRowsInFlight; first < count; first += warps * kRowsInFlight) {
    const int64_t f = first + Lane() % kRowsInFlight;
    const bool mine = Lane() < kCopies && f < count;
    RowCopy copy;
    int64_t slot = 0;
    if (mine && drains) {
      copy = DrainCopy(cache, f);
    } else if (mine) {
      slot = moves.slots[f];
      const int64_t row = kStep == CopyStep::kMove && fills ? cache.tags[slot] : moves.rows[f];
      copy = MoveCopy<kStep>(cache, slot, row, fills, f);
      if (kStep == CopyStep::kStage && f < cache.staging_capacity) cache.staged_rows[f] = row;
    }
    WarpCopyRows<kCopies>(copy);
    if (kStep == CopyStep::kStage && mine) moves.rows[f] = cache.tags[slot];
  }
}

// The moves in home order: sorted from buffer `at` into one of the two,
// whose index it returns (the other is free again).
int SortMoves(const MissSort& sort, int64_t* const rows[2], uint32_t* const slots[2], int at,
              cudaStream_t stream) {
  MissSort by_home = sort;
  by_home.by_home = true;
  for (int b = 0; b < 2; ++b) {
    by_home.rows[b] = rows[(at + b) % 2];
    by_home.positions[b] = slots[(at + b) % 2];
  }
  return (at + SortMissesCuda(by_home, kOp, stream)) % 2;
}

template <CopyStep kStep>
void LaunchCopy(const CacheArgs& cache, const Moves& moves, const Header* header, unsigned grid,
                cudaStream_t stream, const char* what) {
  CopyRowsKernel<kStep><<<grid, kBlockThreads, 0, stream>>>(cache, moves, header);
  CudaCheckLaunch(what, kOp);
}

// A pass's moves, listed by the insert in the buffers `free` (the sorted
// misses leave them free), as CopyStep says.
void MoveRows(const CacheArgs& cache, MissSort sort, const Scratch& sc, int free, unsigned grid,
              cudaStream_t stream) {
  const auto moves = [&](int at) {
    return Moves{&sc.header->moves, sc.rows[at], sc.positions[at]};
  };
  if (!cache.home_mapped) {
    LaunchCopy<CopyStep::kMove>(cache, moves(free), sc.header, grid, stream,
                                "CopyRowsKernel (move)");
    return;
  }
  sort.count = &sc.header->moves;
  int at = SortMoves(sort, sc.rows, sc.positions, free, stream);
  LaunchCopy<CopyStep::kStage>(cache, moves(at), sc.header, grid, stream, "CopyRowsKernel (stage)");
  at = SortMoves(sort, sc.rows, sc.positions, at, stream);
  LaunchCopy<CopyStep::kFillAndDrain>(cache, moves(at), sc.header, 2 * grid, stream,
                                      "CopyRowsKernel (fill and drain)");
}

// A thread per (table, field): the step's tallies summed into this step's
// statistics (zeroed by BeginKernel), their totals row and the totals since
// creation, and zeroed for the next step.
__global__ void FinishKernel(const CacheArgs cache, const Header* header) {
  if (header->fault_key != kNoFaultKey || cache.stat_tallies == nullptr) return;
  const int64_t fields = int64_t{cache.num_tables} * kStatFields;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < fields; i += stride) {
    int64_t tally[kStatTallies];  // every load in flight before the stores
#pragma unroll
    for (int t = 0; t < kStatTallies; ++t) tally[t] = cache.stat_tallies[t * fields + i];
    int64_t sum = 0;
#pragma unroll
    for (int t = 0; t < kStatTallies; ++t) {
      sum += tally[t];
      cache.stat_tallies[t * fields + i] = 0;
    }
    cache.stats_step[i] = sum;
    cache.stats_total[i] += sum;
    const int64_t totals = fields + i % kStatFields;
    const auto v = static_cast<unsigned long long>(sum);
    atomicAdd(reinterpret_cast<unsigned long long*>(cache.stats_step + totals), v);
    atomicAdd(reinterpret_cast<unsigned long long*>(cache.stats_total + totals), v);
  }
}

}  // namespace

int64_t PrefetchScratchBytes(int64_t chunk_indices) {
  // A linear bound of Carve(chunk).bytes (24 bytes an index, the tile
  // counts' 0.5 and their rounding within the rest), so that the bytes of
  // one index estimate the bytes of any chunk (CachedTbe::PassesFor).
  return 25 * std::max<int64_t>(chunk_indices, 0) + static_cast<int64_t>(sizeof(Header));
}

void PrefetchCuda(const CacheArgs& cache, const BatchArgs& batch, const LocationArgs& where,
                  int64_t timestep, int passes, void* scratch, int64_t scratch_bytes,
                  BatchFault* fault, int device, void* stream) {
  const ScopedDevice on_device(device);
  const cudaStream_t s = AsStream(stream);
  const int64_t n = batch.num_indices;
  const int64_t chunk = passes <= 1 ? n : (n + passes - 1) / passes;
  if (chunk > std::numeric_limits<uint32_t>::max()) {
    throw InvalidArgument(std::string("[") + kOp + "] " + std::to_string(chunk) +
                          " indices a pass; a GPU prefetch takes at most 2^32 - 1 (use more "
                          "passes)");
  }
  const Scratch sizes = Carve(nullptr, chunk);
  if (scratch_bytes < sizes.bytes || reinterpret_cast<uintptr_t>(scratch) % 8 != 0) {
    throw InvalidArgument(std::string("[") + kOp + "] scratch of " + std::to_string(scratch_bytes) +
                          " bytes; " + std::to_string(sizes.bytes) + " (8-byte aligned) needed");
  }
  const Scratch sc = Carve(scratch, chunk);
  CheckBatchCuda(cache, batch, &sc.header->fault_key, kOp, s);
  BeginKernel<<<1, kBlockThreads, 0, s>>>(cache, batch, where, sc.header, fault);
  CudaCheckLaunch("BeginKernel", kOp);

  MissSort sort;
  sort.fault_key = &sc.header->fault_key;
  sort.capacity = chunk;
  sort.num_sets = cache.num_sets;
  sort.row_bits = BitsFor(cache.total_rows - 1);
  sort.set_bits = BitsFor(cache.num_sets - 1);
  for (int b = 0; b < 2; ++b) {
    sort.rows[b] = sc.rows[b];
    sort.positions[b] = sc.positions[b];
  }
  sort.tile_counts = sc.tile_counts;
  int pass = 0;
  for (int64_t begin = 0; begin < n; begin += std::max<int64_t>(chunk, 1), ++pass) {
    const int64_t end = std::min(n, begin + chunk);
    unsigned long long* misses = &sc.header->misses[pass % 2];
    ProbeKernel<<<GridFor(end - begin, kBlockThreads, std::numeric_limits<int32_t>::max()),
                  kBlockThreads, 0, s>>>(cache, batch, where, timestep, begin, end, misses,
                                         sc.header, sc.rows[0], sc.positions[0]);
    CudaCheckLaunch("ProbeKernel", kOp);
    sort.count = misses;
    const int sorted = SortMissesCuda(sort, kOp, s);
    InsertKernel<<<GridFor(end - begin, kBlockThreads, 4096), kBlockThreads, 0, s>>>(
        cache, where, Moves{&sc.header->moves, sc.rows[1 - sorted], sc.positions[1 - sorted]},
        timestep, begin, misses, &sc.header->misses[(pass + 1) % 2], sc.header, sc.rows[sorted],
        sc.positions[sorted]);
    CudaCheckLaunch("InsertKernel", kOp);
    MoveRows(cache, sort, sc, 1 - sorted, GridFor(end - begin, kBlockWarps * kRowsInFlight, 2048),
             s);
  }
  FinishKernel<<<GridFor(int64_t{cache.num_tables} * kStatFields, kBlockThreads), kBlockThreads, 0,
                 s>>>(cache, sc.header);
  CudaCheckLaunch("FinishKernel", kOp);
}

}  // namespace ember::cache::internal
