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
//        lists it in `locked` and counts the row as unique. A miss appends
//        its row and position to the miss list. LFU: every index adds one
//        to its row's count (the lanes of a row in one atomic), hit or miss.
//     b. Group only the misses by set (miss_sort_cuda.cu): by (set, row),
//        or by set alone where no set has more than 31; one launch, which
//        returns at once when nothing missed.
//     c. Insert (a warp per set run of the sorted misses): the warp orders
//        the set's eligible ways by VictimKey (WarpVictimOrder) and a run
//        that fits in its lanes by row (WarpSortMisses), walks the
//        run's distinct rows in increasing id, counts each (unique,
//        unique_misses), gives the first ones the victims in order (each
//        slot its new tag, timestamp and lock) and counts the rest (rows
//        and their indices) as conflict misses. LFU (its own kernel) first
//        ranks the run's distinct rows by count, keeping the best 32 over
//        the run's windows (PairLfuRun), admits the r-th over the r-th
//        victim where that one's count is no larger, and then, walking the
//        run, finds each row among the admitted by a binary search across
//        the warp. Both write the locations of the run's indices
//        and lists each fill (slot, evicted row) as a move. Sets are
//        independent (a row lives in one set; a victim is cached, a miss is
//        not), so warps need no ordering among themselves.
//     d. The pass's rows (MovePassRows, move_rows_cuda.cuh): a managed
//        home's moved both ways; a mapped home's evicted rows taken out of
//        their slots, its fills deferred.
//  4. LFU with several passes: the indices an earlier pass left at home
//     whose row a later pass admitted get its slot (RelocateKernel).
//  5. A mapped home's deferred fills, sorted into home order, copied in
//     while the staged rows go home (FinishMoves).
//  6. Sum the statistics' tallies (FinishKernel).
// The result equals PrefetchCpu's in every slot, tag, timestamp, lock,
// location and statistic; only the order of `locked` may differ.
//
// Scratch (PrefetchScratchPlan, cache_kernels.h; reused by every pass): a
// header (fault key, miss counts and the moves' counters), the miss rows
// (i64) and positions (u32) twice (the radix sort's two buffers; the sort
// leaves buffer 1 free, and the moves are listed there; at the end, pieces
// of the deferred fills), the radix sort's tile counts (2 KiB a tile of
// kMissTile, for the largest sort), a mapped home's deferred fills (u32
// each) and, with several passes, the staged rows' index (u32 a home key).

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "cache/internal/cache_cuda.cuh"
#include "cache/internal/cache_kernels.h"
#include "cache/internal/move_rows_cuda.cuh"
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
  unsigned long long long_runs;  // the miss sort's (MissSort)
  MoveCounts moves;
};
static_assert(sizeof(Header) % 8 == 0 && sizeof(Header) <= kPrefetchHeaderBytes);

struct Scratch {
  Header* header = nullptr;
  int64_t* rows[2] = {nullptr, nullptr};
  uint32_t* positions[2] = {nullptr, nullptr};
  uint32_t* tile_counts = nullptr;
  uint32_t* fills = nullptr;
  uint32_t* key_starts = nullptr;
  int64_t bytes = 0;  // used
};

// The scratch's pieces as `plan` lays them out, from `base` (null:
// measures).
Scratch Carve(void* base, const PrefetchScratchPlan& plan) {
  auto* at = static_cast<char*>(base);
  int64_t used = 0;
  auto take = [&](int64_t bytes) {
    char* piece = at == nullptr ? nullptr : at + used;
    used += bytes;
    return piece;
  };
  Scratch s;
  s.header = reinterpret_cast<Header*>(take(sizeof(Header)));
  const int64_t entries = plan.sort_entries;
  for (int b = 0; b < 2; ++b) s.rows[b] = reinterpret_cast<int64_t*>(take(8 * entries));
  for (int b = 0; b < 2; ++b) s.positions[b] = reinterpret_cast<uint32_t*>(take(4 * entries));
  s.tile_counts = reinterpret_cast<uint32_t*>(take(MissTileCountBytes(plan.largest_sort)));
  s.fills = reinterpret_cast<uint32_t*>(take(4 * plan.fills));
  if (plan.staged_index) s.key_starts = reinterpret_cast<uint32_t*>(take(4 * kHomeKeys));
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
  AwaitPreviousKernel();
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
    header->moves = MoveCounts{};
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
  AwaitPreviousKernel();
  if (header->fault_key != kNoFaultKey) return;
  if (blockIdx.x == 0) {
    CountRequested(cache, batch, begin, end);
    BeginPassMoves(&header->moves, cache.staging_capacity);
  }
  const int64_t first = begin + int64_t{blockIdx.x} * kBlockThreads;
  const TableSpan span = BlockTableSpan(batch, cache.num_tables, first, kBlockThreads, end);
  const int64_t k = first + threadIdx.x;
  const bool valid = k < end;
  int table = 0;
  int64_t row = 0;
  if (valid) {
    table = TableOfIndex(batch, span, k);
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
  if (first_use) cache.locks[slot] += 1;
  if (cache.policy == Policy::kLfu) {
    // LFU counts every index, hit or miss (FBGEMM's lfu_update_counts),
    // before the insert reads the counts: the lanes of a row add their
    // number at once, from the lowest of them.
    const unsigned peers = __match_any_sync(kFullMask, valid ? row : -1);
    if (valid && Lane() == __ffs(peers) - 1) {
      atomicAdd(reinterpret_cast<unsigned long long*>(cache.counts + row),
                static_cast<unsigned long long>(__popc(peers)));
    }
  }
  WarpCount(cache, table, {StatCount{kUnique, first_use}});
  WarpAppend(where.locked, where.num_locked, first_use, static_cast<int32_t>(slot));
  const bool miss = valid && !hit;
  const unsigned long long at = WarpReserve(misses, miss);
  if (miss) {
    miss_rows[at] = row;
    miss_positions[at] = static_cast<uint32_t>(k - begin);
  }
}

// A miss of the sorted list: its row, and its index's position in the pass.
struct Miss {
  int64_t row;
  uint32_t position;
};

// The misses of a run held by lanes [0, length) (`in_run`) sorted by row,
// then by position.
__device__ Miss WarpSortMisses(Miss miss, bool in_run, int length) {
  if (!in_run) miss = Miss{INT64_MAX, static_cast<uint32_t>(Lane())};
  const auto partner = [](const Miss& m, int mask) {
    return Miss{__shfl_xor_sync(kFullMask, m.row, mask),
                __shfl_xor_sync(kFullMask, m.position, mask)};
  };
  const auto before = [](const Miss& a, const Miss& b) {
    return a.row != b.row ? a.row < b.row : a.position < b.position;
  };
  return WarpSort(miss, partner, before, 1 << (32 - __clz(length - 1)));
}

// LFU's candidate: a distinct missed row of a run and its count. `Better`
// is offered a victim first (invariant 4): the larger count, then the
// smaller row.
struct Candidate {
  int64_t count;
  int64_t row;
};
__device__ inline bool Better(const Candidate& a, const Candidate& b) {
  return a.count != b.count ? a.count > b.count : a.row < b.row;
}

// LFU's pairing of a run (InsertRun's) with its set's victims: the run's
// distinct rows ranked by Better, the r-th offered the r-th victim and
// admitted only where that victim's count is no larger than its own.
struct LfuPairing {
  int way_of_rank;   // lane r: the way taken r-th (WarpVictimOrder)
  int64_t admitted;  // lane r: the r-th smallest admitted row (INT64_MAX beyond them)
  int rank;          // lane r: that row's rank (the victim it takes)
};

// The run's best rows by Better: a window at a time, the window's distinct
// rows sorted across the warp (WarpSort) and merged with the best 32 so far
// (the better of lane i's and of the window's (31 - i)-th is a bitonic
// sequence holding the best 32 of both; one bitonic merge sorts it). A set
// has 32 ways, so no more than the best 32 can be admitted. The windows
// are read as InsertRun reads them (the same first-window sort), so that
// both find the same distinct rows.
__device__ LfuPairing PairLfuRun(const CacheArgs& cache, const int64_t* rows,
                                 const uint32_t* positions, int64_t count, int64_t start,
                                 int64_t set, const VictimOrder& way_key, unsigned eligible_ways) {
  const int lane = Lane();
  const auto shuffle_xor = [](const Candidate& c, int mask) {
    return Candidate{__shfl_xor_sync(kFullMask, c.count, mask),
                     __shfl_xor_sync(kFullMask, c.row, mask)};
  };
  const auto better = [](const Candidate& a, const Candidate& b) { return Better(a, b); };
  const Candidate none{INT64_MIN, INT64_MAX};  // worse than any row
  Candidate best = none;                       // lane r: the r-th best row so far
  int64_t distinct = 0;                        // distinct rows of the run
  int64_t previous = -1;                       // the run's row before this window
  for (int64_t window = start;; window += kWarp) {
    const int64_t j = window + lane;
    Miss miss{j < count ? rows[j] : -1, j < count ? positions[j] : 0};
    const bool in_run = j < count && SetOf(miss.row, cache.num_sets) == set;
    const unsigned run = __ballot_sync(kFullMask, in_run);
    if (run == 0) break;
    int64_t below = __shfl_up_sync(kFullMask, miss.row, 1);
    if (window == start && run != kFullMask &&
        __ballot_sync(kFullMask, in_run && lane > 0 && below > miss.row) != 0) {
      miss = WarpSortMisses(miss, in_run, __popc(run));
      below = __shfl_up_sync(kFullMask, miss.row, 1);
    }
    const bool head = in_run && miss.row != (lane == 0 ? previous : below);
    distinct += __popc(__ballot_sync(kFullMask, head));
    // The counts include this pass's indices: the probe added them.
    Candidate mine = head ? Candidate{cache.counts[miss.row], miss.row} : none;
    mine = WarpSort(mine, shuffle_xor, better);
    if (window == start) {
      best = mine;
    } else {
      const Candidate other{__shfl_sync(kFullMask, mine.count, kWarp - 1 - lane),
                            __shfl_sync(kFullMask, mine.row, kWarp - 1 - lane)};
      if (Better(other, best)) best = other;
      for (int m = kWarp / 2; m > 0; m /= 2) {  // WarpSort's last stage
        const Candidate partner = shuffle_xor(best, m);
        if ((lane & m) == 0 ? Better(partner, best) : Better(best, partner)) best = partner;
      }
    }
    previous = __shfl_sync(kFullMask, miss.row, kWarp - 1);
    if (run != kFullMask) break;
  }
  LfuPairing pairing;
  pairing.way_of_rank = WarpVictimOrder(cache, way_key, eligible_ways, distinct == 1);
  const int64_t victims = __popc(eligible_ways);
  const int64_t offered = distinct < victims ? distinct : victims;
  const int64_t victim_count = __shfl_sync(kFullMask, way_key.count, pairing.way_of_rank);
  // Candidates descend and victims ascend in count: the admitted are the
  // first ones (FBGEMM stops at the first refusal).
  const bool admitted = lane < offered && victim_count <= best.count;
  const int admitted_rows = __popc(__ballot_sync(kFullMask, admitted));
  struct Admitted {
    int64_t row;
    int rank;
  };
  Admitted mine{admitted ? best.row : INT64_MAX, lane};
  if (admitted_rows > 1) {  // by row, for InsertRun's search
    const auto partner = [](const Admitted& a, int mask) {
      return Admitted{__shfl_xor_sync(kFullMask, a.row, mask),
                      __shfl_xor_sync(kFullMask, a.rank, mask)};
    };
    const auto before = [](const Admitted& a, const Admitted& b) { return a.row < b.row; };
    mine = WarpSort(mine, partner, before, 1 << (32 - __clz(admitted_rows - 1)));
  }
  pairing.admitted = mine.row;
  pairing.rank = mine.rank;
  return pairing;
}

// The number of lanes whose `sorted` (ascending across the warp) is below
// `value`, capped at 31: a binary search by shuffles (5 of them).
__device__ inline int WarpLowerBound(int64_t sorted, int64_t value) {
  int at = 0;
  for (int step = kWarp / 2; step > 0; step /= 2) {
    if (__shfl_sync(kFullMask, sorted, at + step - 1) < value) at += step;
  }
  return at;
}

// The misses of set `set`, entries [start, ...) of rows/positions: sorted by
// row, or, where the run ends in its first window, in any order. LRU gives
// the victims to the run's distinct rows in increasing id, as they come;
// LFU (kLfu) ranks them by count first (PairLfuRun) and admits only some.
template <bool kLfu>
__device__ void InsertRun(const CacheArgs& cache, const LocationArgs& where, const Moves& moves,
                          int64_t timestep, int64_t begin, const int64_t* rows,
                          const uint32_t* positions, int64_t count, int64_t start, int64_t set) {
  const int lane = Lane();
  // The set's ways: which may be victims, and in which order (invariant 4).
  const int64_t way_slot = set * kWays + lane;
  const int64_t tag = cache.tags[way_slot];
  const int way_dirty = cache.dirty[way_slot];
  const bool eligible = cache.locks[way_slot] == 0 && cache.timestamps[way_slot] < timestep;
  const unsigned eligible_ways = __ballot_sync(kFullMask, eligible);
  const int victims = __popc(eligible_ways);
  const VictimOrder way_key = VictimKey(cache, way_slot);
  int way_of_rank = 0;  // the way taken lane-th, from the first window on
  LfuPairing lfu{};
  if constexpr (kLfu) {
    lfu = PairLfuRun(cache, rows, positions, count, start, set, way_key, eligible_ways);
    way_of_rank = lfu.way_of_rank;
  }

  int64_t distinct = 0;   // distinct rows of the run before this window
  int64_t previous = -1;  // the run's row before this window (none before the first)
  for (int64_t window = start;; window += kWarp) {
    const int64_t j = window + lane;
    Miss miss{j < count ? rows[j] : -1, j < count ? positions[j] : 0};
    const bool in_run = j < count && SetOf(miss.row, cache.num_sets) == set;
    const unsigned run = __ballot_sync(kFullMask, in_run);  // lanes 0.. (grouped by set)
    if (run == 0) break;
    int64_t below = __shfl_up_sync(kFullMask, miss.row, 1);
    // A run that ends in its first window may be grouped by set only; it is
    // in order already where it is one row, or the pass sorted by set and row.
    if (window == start && run != kFullMask &&
        __ballot_sync(kFullMask, in_run && lane > 0 && below > miss.row) != 0) {
      miss = WarpSortMisses(miss, in_run, __popc(run));
      below = __shfl_up_sync(kFullMask, miss.row, 1);
    }
    const int64_t row = miss.row;
    const bool head = in_run && row != (lane == 0 ? previous : below);
    const unsigned heads = __ballot_sync(kFullMask, head);
    bool inserted = false;
    int way = 0;
    if constexpr (kLfu) {
      // The row's place among the admitted rows, if it is one of them.
      const int at = WarpLowerBound(lfu.admitted, row);
      const bool admitted = __shfl_sync(kFullMask, lfu.admitted, at) == row;
      const int rank = __shfl_sync(kFullMask, lfu.rank, at);
      inserted = in_run && admitted;
      way = __shfl_sync(kFullMask, way_of_rank, inserted ? rank : 0);
    } else {
      if (window == start) {
        const bool one_row = run != kFullMask && __popc(heads) == 1;
        way_of_rank = WarpVictimOrder(cache, way_key, eligible_ways, one_row);
      }
      // The row's rank among the run's distinct rows (shared by its repeats).
      const int64_t row_rank = distinct + __popc(heads & (LanesBelow() | (1u << lane))) - 1;
      inserted = in_run && row_rank < victims;
      way = __shfl_sync(kFullMask, way_of_rank, inserted ? static_cast<int>(row_rank) : 0);
    }
    const bool conflict = in_run && !inserted;  // every index of a row left at home
    const int64_t slot = inserted ? set * kWays + way : kMiss;
    const int64_t evicted = __shfl_sync(kFullMask, tag, way);  // the way's row before this pass
    const bool fills = head && inserted;
    const bool evicts = fills && evicted != kEmpty;
    // Every evicted row goes home, or only a dirty one (invariant 5).
    const int dirty = __shfl_sync(kFullMask, way_dirty, way);  // every lane shuffles
    const bool writes_back = evicts && (cache.write_back_every_row || dirty != 0);
    const int table = head || conflict ? TableOf(cache, row) : 0;
    const int evicted_table = evicts ? TableOf(cache, evicted) : 0;
    if (writes_back && moves.evicted_in_bin != nullptr) {
      atomicAdd(&moves.evicted_in_bin[HomeBin(evicted, moves.row_bits)], 1u);
    }
    WarpCount(cache, table,
              {StatCount{kUnique, head}, StatCount{kUniqueMisses, head},
               StatCount{kUniqueConflictMisses, head && !inserted},
               StatCount{kConflictMissIndices, conflict}, StatCount{kInserted, fills},
               StatCount{kBytesToCache, fills, RowBytes(cache, table)}});
    WarpCount(cache, evicted_table,
              {StatCount{kEvicted, evicts},
               StatCount{kBytesToHome, writes_back, RowBytes(cache, evicted_table)}});
    const unsigned long long at = WarpReserve(moves.count, fills);
    if (fills) {
      moves.rows[at] = writes_back ? evicted : kEmpty;  // kEmpty: nothing goes home
      moves.slots[at] = static_cast<uint32_t>(slot);
    }
    if (fills) {
      cache.tags[slot] = row;
      cache.timestamps[slot] = timestep;
      cache.locks[slot] = 1;
      cache.dirty[slot] = 0;
    }
    WarpAppend(where.locked, where.num_locked, fills, static_cast<int32_t>(slot));
    if (in_run) where.slot_of[begin + miss.position] = static_cast<int32_t>(slot);
    previous = __shfl_sync(kFullMask, row, kWarp - 1);
    distinct += __popc(heads);
    if (run != kFullMask) break;
  }
}

// A warp per sorted miss, which inserts the set run that starts there (a
// run is one set's misses). Not a warp per window of 32: a pass of few
// misses a set has a run at nearly every entry, and a warp would take up
// to 32 of them in turn, each a chain of dependent loads.
// Six blocks an SM (40 registers, a few spilled): a pass of few misses a set
// is bound by the runs in flight, each a chain of dependent loads and
// atomics; four blocks (56 registers) took 11% longer at twelve passes.
// LRU and LFU are two kernels, so that LRU's keeps its registers.
template <bool kLfu>
__global__ void __launch_bounds__(kBlockThreads, 6)
    InsertKernel(const CacheArgs cache, const LocationArgs where, const Moves moves,
                 int64_t timestep, int64_t begin, const unsigned long long* misses,
                 unsigned long long* next_misses, const Header* header, const int64_t* rows,
                 const uint32_t* positions) {
  AwaitPreviousKernel();
  if (header->fault_key != kNoFaultKey) return;
  if (blockIdx.x == 0 && threadIdx.x == 0) *next_misses = 0;
  const auto count = static_cast<int64_t>(*misses);
  const int64_t warps = int64_t{gridDim.x} * kBlockWarps;
  for (int64_t j = int64_t{blockIdx.x} * kBlockWarps + threadIdx.x / kWarp; j < count; j += warps) {
    const int64_t set = SetOf(rows[j], cache.num_sets);
    if (j > 0 && SetOf(rows[j - 1], cache.num_sets) == set) continue;  // the whole warp
    InsertRun<kLfu>(cache, where, moves, timestep, begin, rows, positions, count, j, set);
  }
}

// LFU with several passes, a thread per index of the passes before the
// last: an index its pass left at home (kMiss) whose row a later pass
// admitted (its count grew) gets the row's slot, as PrefetchCpu gives
// every index its location after the passes (a backward of the batch
// before, relooked up after this prefetch, updates that slot, not the home
// row), and no longer counts as a conflict miss's index. LRU never admits
// a row a pass left at home: a set's victims only dwindle in a timestep.
__global__ void __launch_bounds__(kBlockThreads)
    RelocateKernel(const CacheArgs cache, const BatchArgs batch, const LocationArgs where,
                   int64_t end, const Header* header) {
  AwaitPreviousKernel();
  if (header->fault_key != kNoFaultKey) return;
  const int64_t first = int64_t{blockIdx.x} * kBlockThreads;
  const TableSpan span = BlockTableSpan(batch, cache.num_tables, first, kBlockThreads, end);
  const int64_t k = first + threadIdx.x;
  const bool valid = k < end && where.slot_of[k] == kMiss;
  int table = 0;
  int64_t row = 0;
  if (valid) {
    table = TableOfIndex(batch, span, k);
    row = cache.row_offsets[table] + IndexAt(batch, k);
  }
  const int64_t slot = WarpFindSlot(cache, row, valid);
  const bool found = valid && slot >= 0;
  if (found) where.slot_of[k] = static_cast<int32_t>(slot);
  WarpCount(cache, table, {StatCount{kConflictMissIndices, found, -1}});
}

// A thread per (table, field): the step's tallies summed into this step's
// statistics (zeroed by BeginKernel), their totals row and the totals since
// creation, and zeroed for the next step.
__global__ void FinishKernel(const CacheArgs cache, const Header* header) {
  AwaitPreviousKernel();
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

void PrefetchCuda(const CacheArgs& cache, const BatchArgs& batch, const LocationArgs& where,
                  int64_t timestep, int passes, void* scratch, int64_t scratch_bytes,
                  BatchFault* fault, int device, void* stream) {
  const ScopedDevice on_device(device);
  const cudaStream_t s = AsStream(stream);
  const int64_t n = batch.num_indices;
  const PrefetchScratchPlan plan = PlanPrefetchScratch(cache, n, passes);
  const int64_t chunk = plan.chunk;
  if (chunk > std::numeric_limits<uint32_t>::max()) {
    throw InvalidArgument(std::string("[") + kOp + "] " + std::to_string(chunk) +
                          " indices a pass; a GPU prefetch takes at most 2^32 - 1 (use more "
                          "passes)");
  }
  const Scratch sizes = Carve(nullptr, plan);
  if (scratch_bytes < sizes.bytes || reinterpret_cast<uintptr_t>(scratch) % 8 != 0) {
    throw InvalidArgument(std::string("[") + kOp + "] scratch of " + std::to_string(scratch_bytes) +
                          " bytes; " + std::to_string(sizes.bytes) + " (8-byte aligned) needed");
  }
  const Scratch sc = Carve(scratch, plan);
  CheckBatchCuda(cache, batch, &sc.header->fault_key, kOp, s);
  LaunchChained("BeginKernel", kOp, BeginKernel, 1, kBlockThreads, s, cache, batch, where,
                sc.header, fault);

  RowMoves moves;
  moves.counts = &sc.header->moves;
  moves.fills = sc.fills;
  moves.fill_capacity = plan.fills;
  moves.piece_capacity = plan.sort_entries;
  moves.key_starts = sc.key_starts;
  moves.passes = plan.passes;
  MissSort& sort = moves.sort;
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
  sort.long_runs = &sc.header->long_runs;
  int pass = 0;
  for (int64_t begin = 0; begin < n; begin += std::max<int64_t>(chunk, 1), ++pass) {
    const int64_t end = std::min(n, begin + chunk);
    unsigned long long* misses = &sc.header->misses[pass % 2];
    LaunchChained("ProbeKernel", kOp, ProbeKernel,
                  GridFor(end - begin, kBlockThreads, std::numeric_limits<int32_t>::max()),
                  kBlockThreads, s, cache, batch, where, timestep, begin, end, misses, sc.header,
                  sc.rows[0], sc.positions[0]);
    MissSort by_set = sort;
    by_set.count = misses;
    SortMissesCuda(by_set, kOp, s);
    LaunchChained("InsertKernel", kOp,
                  cache.policy == Policy::kLfu ? InsertKernel<true> : InsertKernel<false>,
                  GridFor(end - begin, kBlockWarps, 4096), kBlockThreads, s, cache, where,
                  PassMoves(cache, moves, pass), timestep, begin, misses,
                  &sc.header->misses[(pass + 1) % 2], sc.header, sc.rows[0], sc.positions[0]);
    MovePassRows(cache, moves, pass, kOp, s);
  }
  if (cache.policy == Policy::kLfu && plan.passes > 1 && n > chunk) {
    const int64_t before_last = (n - 1) / chunk * chunk;  // the last pass's first index
    LaunchChained("RelocateKernel", kOp, RelocateKernel,
                  GridFor(before_last, kBlockThreads, std::numeric_limits<int32_t>::max()),
                  kBlockThreads, s, cache, batch, where, before_last, sc.header);
  }
  FinishMoves(cache, moves, kOp, s);
  LaunchChained("FinishKernel", kOp, FinishKernel,
                GridFor(int64_t{cache.num_tables} * kStatFields, kBlockThreads), kBlockThreads, s,
                cache, sc.header);
}

}  // namespace ember::cache::internal
