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
#include <climits>
#include <cstdint>

#include "cache/internal/host_row_moves.h"
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
  return static_cast<char*>(cache.staging) + g * SlotBytes(cache);
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

__device__ int64_t WarpOfGrid() { return (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / kWarp; }
__device__ int64_t WarpsOfGrid() { return int64_t{gridDim.x} * blockDim.x / kWarp; }

// The kernels that wait on the link (MoveKernel, FillKernel,
// WriteBackKernel) run in small blocks, each warp with kRowsInFlight rows
// in flight per direction, and at most CacheOptions::link_warps warps. A
// warp reading host memory holds its SM's memory pipeline for the whole
// pass: beside a prefetch, the step's compute kernels slow down with every
// warp of it (SGEMMs beside a block of four such warps on every SM ran
// 3.4x slower with a pinned home, 2.1x with a managed one), while the rows
// need far fewer warps to move at the link's pace (docs/benchmarks.md,
// "What the rows' moves cost the step beside them").
//
// MoveKernel (a managed home) copies a row each way per lane: two warps a
// block, 66 blocks by default, which move the rows at the link's rate
// alone and beside the step alike.
constexpr int kMoveBlockThreads = 2 * kWarp;
constexpr int kMoveBlocks = 66;
// FillKernel and WriteBackKernel (a mapped home) copy one: four warps a
// block, at most 64 registers a thread; a block per SM by default, which
// the GPU's translation of pinned memory needs for the rows' full rate
// when the prefetch runs alone.
constexpr int kFillBlockThreads = 4 * kWarp;
constexpr int kFillBlocksPerSm = 65536 / (64 * kFillBlockThreads);
// Their grid's cap: none but LinkGrid's own, a block per SM.
constexpr int kFillBlocks = INT_MAX;

// A managed home's pass: lanes 0.. write the moves' evicted rows home,
// lanes kRowsInFlight.. fill their slots. Moves are of distinct slots, and
// an evicted row (cached) is never a new row (missing), so no two copies
// touch the same bytes.
__global__ void __launch_bounds__(kMoveBlockThreads)
    MoveKernel(const CacheArgs cache, const Moves moves, const unsigned long long* fault_key) {
  AwaitPreviousKernel();
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

// A deferred fill: its slot, and in the top bit whether the row it
// evicts waits in its slot for the way home (no staging row was left).
constexpr uint32_t kWritesBack = 0x80000000u;  // slots fit 31 bits (locations are i32)

// The highest HomeBin whose rows may take the staging: the staging's room
// left at the pass's start holds every evicted row of the bins below it.
// A block's threads (kBlockThreads, one per bin) all call it.
__device__ int StagingCutoff(const MoveCounts& counts, int64_t staging_limit) {
  using Scan = cub::BlockScan<unsigned long long, kBlockThreads>;
  __shared__ typename Scan::TempStorage scan;
  __shared__ int cutoff;
  const auto limit = static_cast<unsigned long long>(staging_limit);
  const unsigned long long room = limit > counts.staged_before ? limit - counts.staged_before : 0;
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
// else, in the last pass, home at once (its bins are the pass's highest),
// or left in its slot (its id in evicted_of_slot) for the write-backs at
// the end; every move appended to the deferred fills, the pass's at their
// end (`fills`: of the passes before).
// Where the staging may overflow, only the rows of bins up to
// StagingCutoff take it.
__global__ void __launch_bounds__(kBlockThreads, 4)
    StageKernel(const CacheArgs cache, const Moves moves, uint32_t* fills, MoveCounts* counts,
                const unsigned long long* fault_key) {
  AwaitPreviousKernel();
  if (*fault_key != kNoFaultKey) return;
  const bool bins = moves.evicted_in_bin != nullptr;
  const int cutoff = bins ? StagingCutoff(*counts, moves.staging_limit) : kHomeBins;
  uint32_t* pass_fills = fills + counts->fills;
  ForEachWarpCopy<kRowsInFlight>(
      static_cast<int64_t>(*moves.count), WarpOfGrid(), WarpsOfGrid(), [&](int64_t f, bool mine) {
        const int64_t row = mine ? moves.rows[f] : kEmpty;
        const auto slot = mine ? moves.slots[f] : 0u;
        const bool evicts = row != kEmpty;
        const bool may_stage = evicts && cache.staging_capacity > 0 &&
                               (!bins || HomeBin(row, moves.row_bits) <= cutoff);
        const auto g = static_cast<int64_t>(WarpReserve(&counts->staged, may_stage));
        const bool stages = may_stage && g < cache.staging_capacity;
        const bool defers = evicts && !stages && !moves.last_pass;
        if (mine) pass_fills[f] = slot | (defers ? kWritesBack : 0u);
        if (defers) cache.evicted_of_slot[slot] = row;
        if (!stages) return defers ? RowCopy{} : HomeCopy(cache, row, SlotRowAt(cache, slot), true);
        cache.staged_rows[0][g] = row;
        cache.staged_at[0][g] = static_cast<uint32_t>(g);
        RowCopy copy;
        copy.from = SlotRowAt(cache, slot);
        copy.to = StagedRowAt(cache, g);
        copy.bytes = RowBytes(cache, TableOf(cache, row));
        return copy;
      });
}

// The entries of piece `piece` of the deferred fills (sort.capacity
// entries a piece).
__device__ int64_t PieceCount(const MoveCounts& counts, const MissSort& sort, int64_t piece) {
  const int64_t left = static_cast<int64_t>(counts.fills + counts.moves) - piece * sort.capacity;
  return left < 0 ? 0 : (left < sort.capacity ? left : sort.capacity);
}

// A piece's fills as (new row, slot) into buffer 0 of `sort`, for the sort
// into home order, and their count; the next piece's write-backs zeroed
// (this piece's have run) and, first, the staged count clamped to the
// staging's capacity (the staged rows' sort and index follow).
__global__ void GatherFillsKernel(const CacheArgs cache, const uint32_t* fills, MoveCounts* counts,
                                  MissSort sort, int64_t piece) {
  AwaitPreviousKernel();
  if (*sort.fault_key != kNoFaultKey) return;
  const int64_t count = PieceCount(*counts, sort, piece);
  const int64_t i0 = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i0 == 0) {
    counts->piece = static_cast<unsigned long long>(count);
    counts->write_backs = 0;
    const auto capacity = static_cast<unsigned long long>(cache.staging_capacity);
    if (piece == 0 && counts->staged > capacity) counts->staged = capacity;
  }
  const uint32_t* first = fills + piece * sort.capacity;
  for (int64_t i = i0; i < count; i += int64_t{gridDim.x} * blockDim.x) {
    const uint32_t slot = first[i] & ~kWritesBack;
    sort.rows[0][i] = cache.tags[slot];
    sort.positions[0][i] = slot;
  }
}

// A piece's write-backs (the fills whose evicted rows wait in their slots)
// as (evicted row, slot) into buffer 0 of `sort`, counted in
// counts->write_backs (zero).
__global__ void GatherWriteBacksKernel(const CacheArgs cache, const uint32_t* fills,
                                       MoveCounts* counts, MissSort sort, int64_t piece) {
  AwaitPreviousKernel();
  if (*sort.fault_key != kNoFaultKey) return;
  const int64_t count = PieceCount(*counts, sort, piece);
  const uint32_t* first = fills + piece * sort.capacity;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  const int64_t warp_first = int64_t{blockIdx.x} * blockDim.x + threadIdx.x - Lane();
  for (int64_t base = warp_first; base < count; base += stride) {  // whole warps
    const int64_t i = base + Lane();
    const uint32_t entry = i < count ? first[i] : 0u;
    const bool writes_back = (entry & kWritesBack) != 0;
    const unsigned long long at = WarpReserve(&counts->write_backs, writes_back);
    if (!writes_back) continue;
    const uint32_t slot = entry & ~kWritesBack;
    sort.rows[0][at] = cache.evicted_of_slot[slot];
    sort.positions[0][at] = slot;
  }
}

// The evicted rows of a piece (sorted in `rows`, `slots`), written home
// from their slots.
__global__ void __launch_bounds__(kFillBlockThreads, kFillBlocksPerSm)
    WriteBackKernel(const CacheArgs cache, const int64_t* rows, const uint32_t* slots,
                    const unsigned long long* count, const unsigned long long* fault_key) {
  AwaitPreviousKernel();
  if (*fault_key != kNoFaultKey) return;
  ForEachWarpCopy<kRowsInFlight>(
      static_cast<int64_t>(*count), WarpOfGrid(), WarpsOfGrid(), [&](int64_t f, bool mine) {
        if (!mine) return RowCopy{};
        return HomeCopy(cache, rows[f], SlotRowAt(cache, slots[f]), true);
      });
}

// The staged rows, sorted into home order, and where each home key's
// start (with several passes, for the fills of rows staged by an earlier
// pass).
struct Staged {
  const int64_t* rows = nullptr;
  const uint32_t* at = nullptr;
  const unsigned long long* count = nullptr;
  const uint32_t* key_starts = nullptr;  // kHomeKeys entries
};

// Each home key's first entry of the sorted staged rows (its others
// follow it), or kNoStaged: `key_starts` filled with kNoStaged before.
constexpr uint32_t kNoStaged = ~0u;
__global__ void IndexStagedKernel(const Staged staged, uint32_t* key_starts, int row_bits,
                                  const unsigned long long* fault_key) {
  AwaitPreviousKernel();
  if (*fault_key != kNoFaultKey) return;
  const auto count = static_cast<int64_t>(*staged.count);
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < count; i += stride) {
    const uint64_t key = HomeKey(staged.rows[i], row_bits);
    if (i == 0 || HomeKey(staged.rows[i - 1], row_bits) != key) {
      key_starts[key] = static_cast<uint32_t>(i);
    }
  }
}

// The staging row of `row` when it is staged, else -1: its home key's
// first staged row, then a walk of the key's few rows.
__device__ int64_t FindStaged(const Staged& staged, int64_t row, int row_bits) {
  const uint64_t key = HomeKey(row, row_bits);
  const uint32_t first = staged.key_starts[key];
  if (first == kNoStaged) return -1;
  const auto count = static_cast<int64_t>(*staged.count);
  for (int64_t i = first; i < count && HomeKey(staged.rows[i], row_bits) == key; ++i) {
    if (staged.rows[i] == row) return staged.at[i];
  }
  return -1;
}

// The staged rows (sorted into home order) written home from the staging,
// by warps `warp` of `warps`.
__device__ void DrainStaged(const CacheArgs& cache, const Staged& staged, int64_t warp,
                            int64_t warps) {
  ForEachWarpCopy<kRowsInFlight>(
      static_cast<int64_t>(*staged.count), warp, warps, [&](int64_t f, bool mine) {
        if (!mine) return RowCopy{};
        return HomeCopy(cache, staged.rows[f], StagedRowAt(cache, staged.at[f]), true);
      });
}

// A piece of the deferred fills (sorted in `fills`) copied in, by every
// warp, or (`drains`) by the even warps while the odd ones write the staged
// rows home: both directions of the link at once. A fill looks for its row
// among the staged ones where they are indexed (several passes).
__global__ void __launch_bounds__(kFillBlockThreads, kFillBlocksPerSm)
    FillKernel(const CacheArgs cache, const int64_t* fill_rows, const uint32_t* fill_slots,
               const unsigned long long* fill_count, const Staged staged, bool drains, int row_bits,
               const unsigned long long* fault_key) {
  AwaitPreviousKernel();
  if (*fault_key != kNoFaultKey) return;
  const int64_t any_warp = WarpOfGrid();
  const bool drainer = drains && any_warp % 2 == 1;
  const int64_t warp = drains ? any_warp / 2 : any_warp;
  const int64_t warps = drains ? WarpsOfGrid() / 2 : WarpsOfGrid();
  if (drainer) {
    DrainStaged(cache, staged, warp, warps);
    return;
  }
  ForEachWarpCopy<kRowsInFlight>(
      static_cast<int64_t>(*fill_count), warp, warps, [&](int64_t f, bool mine) {
        if (!mine) return RowCopy{};
        const int64_t row = fill_rows[f];
        char* cached = SlotRowAt(cache, fill_slots[f]);
        const int64_t g = staged.key_starts != nullptr ? FindStaged(staged, row, row_bits) : -1;
        if (g < 0) return HomeCopy(cache, row, cached, false);
        RowCopy copy;
        copy.from = StagedRowAt(cache, g);
        copy.to = cached;
        copy.bytes = RowBytes(cache, TableOf(cache, row));
        return copy;
      });
}

// Entries rows[0] / positions[0] sorted in place by home order, the other
// buffer taken as scratch.
void SortByHome(MissSort sort, int64_t* const rows[2], uint32_t* const positions[2],
                const unsigned long long* count, int64_t capacity, const char* op,
                cudaStream_t stream) {
  sort.by_home = true;
  sort.count = count;
  sort.capacity = capacity;
  for (int b = 0; b < 2; ++b) {
    sort.rows[b] = rows[b];
    sort.positions[b] = positions[b];
  }
  SortMissesCuda(sort, op, stream);
}

// StageKernel's blocks for `entries`: 32 entries a block. Its copies stay
// in GPU memory but for the last pass's rows that find no staging.
unsigned StageGrid(int64_t entries) { return GridFor(entries, kBlockWarps * kRowsInFlight, 2048); }

// A link-bound kernel's grid for `entries`: at most `blocks` (or
// CacheOptions::link_warps' worth, when set), and at most a block per SM
// of the cache's GPU. Each warp takes kRowsInFlight entries at a time.
unsigned LinkGrid(const CacheArgs& cache, int64_t entries, int block_threads, int blocks,
                  const char* op) {
  int sms = 0;
  CudaCheckForOp(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, cache.device),
                 "cudaDeviceGetAttribute (multiprocessors)", op);
  const int warps = block_threads / kWarp;
  if (cache.link_warps > 0) blocks = std::max(1, cache.link_warps / warps);
  return GridFor(entries, warps * kRowsInFlight, std::min(blocks, sms));
}

// The staged rows' key_starts (IndexStagedKernel).
void IndexStaged(const CacheArgs& cache, Staged& staged, const RowMoves& moves, const char* op,
                 cudaStream_t stream) {
  CudaCheckForOp(cudaMemsetAsync(moves.key_starts, 0xff, kHomeKeys * sizeof(uint32_t), stream),
                 "cudaMemsetAsync of the staged rows' key starts", op);
  LaunchChained("IndexStagedKernel", op, IndexStagedKernel,
                GridFor(cache.staging_capacity, kBlockThreads, 1024), kBlockThreads, stream, staged,
                moves.key_starts, moves.sort.row_bits, moves.sort.fault_key);
  staged.key_starts = moves.key_starts;
}

// Whether a prefetch's evictions may outnumber the staging's rows.
bool MayOverflow(const CacheArgs& cache, const RowMoves& moves) {
  return cache.staging_capacity < moves.fill_capacity;
}

// The sort's buffers sized for a piece of the deferred fills, which is
// smaller than a pass where the fills are cut into pieces.
MissSort PieceSort(const RowMoves& moves) {
  MissSort sort = moves.sort;
  sort.capacity = moves.piece_capacity;
  return sort;
}

// Piece `piece` of the deferred fills gathered and sorted into home order
// (buffer 0 of `sort`), and on piece 0, the staged rows too.
void SortPiece(const CacheArgs& cache, const RowMoves& moves, const MissSort& sort, int64_t piece,
               const char* op, cudaStream_t stream) {
  LaunchChained("GatherFillsKernel", op, GatherFillsKernel,
                GridFor(sort.capacity, kBlockThreads, 1024), kBlockThreads, stream, cache,
                moves.fills, moves.counts, sort, piece);
  if (piece == 0 && cache.staging_capacity > 0) {
    SortByHome(sort, cache.staged_rows, cache.staged_at, &moves.counts->staged,
               cache.staging_capacity, op, stream);
  }
  SortByHome(sort, sort.rows, sort.positions, &moves.counts->piece, sort.capacity, op, stream);
}

// The staged rows written home by the warps of a whole grid, while the
// host gathers the new rows (CopyEngineFills).
__global__ void __launch_bounds__(kFillBlockThreads, kFillBlocksPerSm)
    DrainKernel(const CacheArgs cache, const Staged staged, const unsigned long long* fault_key) {
  AwaitPreviousKernel();
  if (*fault_key != kNoFaultKey) return;
  DrainStaged(cache, staged, WarpOfGrid(), WarpsOfGrid());
}

// A piece of copy-engine fills (CopyEngineFills): the staging's rows
// [0, count) scattered into their slots (`fill_slots`).
__global__ void __launch_bounds__(kFillBlockThreads)
    ScatterKernel(const CacheArgs cache, const uint32_t* fill_slots,
                  const unsigned long long* fill_count, const unsigned long long* fault_key) {
  AwaitPreviousKernel();
  if (*fault_key != kNoFaultKey) return;
  ForEachWarpCopy<kRowsInFlight>(static_cast<int64_t>(*fill_count), WarpOfGrid(), WarpsOfGrid(),
                                 [&](int64_t f, bool mine) {
                                   if (!mine) return RowCopy{};
                                   const uint32_t slot = fill_slots[f];
                                   RowCopy copy;
                                   copy.from = StagedRowAt(cache, f);
                                   copy.to = SlotRowAt(cache, slot);
                                   copy.bytes = RowBytes(cache, TableOf(cache, cache.tags[slot]));
                                   return copy;
                                 });
}

// What the host reads of the prefetch before moving its rows.
struct HostHeader {
  unsigned long long fault_key;
  MoveCounts counts;
};
static_assert(sizeof(HostHeader) <= kHostFillHeaderBytes);

void CopyAsync(void* to, const void* from, int64_t bytes, cudaMemcpyKind kind, const char* op,
               cudaStream_t stream) {
  if (bytes == 0) return;
  CudaCheckForOp(cudaMemcpyAsync(to, from, static_cast<std::size_t>(bytes), kind, stream),
                 "cudaMemcpyAsync of a copy-engine fill's rows", op);
}

void Synchronize(const char* op, cudaStream_t stream) {
  CudaCheckForOp(cudaStreamSynchronize(stream),
                 "cudaStreamSynchronize (a copy-engine fill's host round trip)", op);
}

// A mapped home's deferred fills by the copy engines (MappedFills::
// kCopyEngine, host_row_moves.h), where the prefetch had one pass and its
// new rows fit the staging: the new rows sorted into home order on the
// GPU and their list copied out, the host's threads gathering them from
// home while DrainKernel writes the staged rows home (disjoint rows: the
// evicted were cached, the new ones missing), then one copy brings them
// into the staging, after the drain, for ScatterKernel. Returns false,
// having changed nothing FinishMoves does not redo, where it does not
// apply.
bool CopyEngineFills(const CacheArgs& cache, const RowMoves& moves, const char* op,
                     cudaStream_t stream) {
  HostFills* fills = cache.host_fills;
  const MissSort sort = PieceSort(moves);
  if (fills == nullptr || moves.passes != 1 || moves.fill_capacity > sort.capacity) return false;
  const HostFillBuffers host = CarveHostFills(*fills);
  auto* header = static_cast<HostHeader*>(host.header);
  SortPiece(cache, moves, sort, 0, op, stream);
  CopyAsync(&header->fault_key, sort.fault_key, sizeof(header->fault_key), cudaMemcpyDeviceToHost,
            op, stream);
  CopyAsync(&header->counts, moves.counts, sizeof(MoveCounts), cudaMemcpyDeviceToHost, op, stream);
  Synchronize(op, stream);
  if (header->fault_key != kNoFaultKey) return true;  // a bad batch: nothing moves
  const auto new_rows = static_cast<int64_t>(header->counts.piece);
  const auto staged = static_cast<int64_t>(header->counts.staged);  // clamped by GatherFills
  if (new_rows > cache.staging_capacity) return false;
  const int64_t slot_bytes = SlotBytes(cache);
  CopyAsync(host.fill_rows, sort.rows[0], 8 * new_rows, cudaMemcpyDeviceToHost, op, stream);
  Synchronize(op, stream);
  const Staged drain{cache.staged_rows[0], cache.staged_at[0], &moves.counts->staged, nullptr};
  LaunchChained("DrainKernel", op, DrainKernel,
                LinkGrid(cache, staged, kFillBlockThreads, kFillBlocks, op), kFillBlockThreads,
                stream, cache, drain, sort.fault_key);
  MoveRowsOnHost(fills->cache, host, new_rows, *fills->threads);
  CopyAsync(cache.staging, host.fill_data, slot_bytes * new_rows, cudaMemcpyHostToDevice, op,
            stream);
  LaunchChained("ScatterKernel", op, ScatterKernel,
                GridFor(new_rows, kFillBlockThreads / kWarp * kRowsInFlight, 1024),
                kFillBlockThreads, stream, cache, static_cast<const uint32_t*>(sort.positions[0]),
                static_cast<const unsigned long long*>(&moves.counts->piece), sort.fault_key);
  fills->last_fills = new_rows;
  fills->total_fills += new_rows;
  return true;
}

}  // namespace

Moves PassMoves(const CacheArgs& cache, const RowMoves& moves, int pass) {
  Moves listed{&moves.counts->moves, moves.sort.rows[1], moves.sort.positions[1]};
  if (MayOverflow(cache, moves)) {  // never for a managed home (no deferred fills)
    listed.evicted_in_bin = moves.counts->evicted_in_bin;
    listed.row_bits = moves.sort.row_bits;
    listed.staging_limit = cache.staging_capacity * (pass + 1) / std::max(moves.passes, 1);
  }
  listed.last_pass = pass + 1 >= moves.passes;
  return listed;
}

void MovePassRows(const CacheArgs& cache, const RowMoves& moves, int pass, const char* op,
                  cudaStream_t stream) {
  const unsigned long long* fault_key = moves.sort.fault_key;
  if (moves.fill_capacity == 0) {
    LaunchChained("MoveKernel", op, MoveKernel,
                  LinkGrid(cache, moves.sort.capacity, kMoveBlockThreads, kMoveBlocks, op),
                  kMoveBlockThreads, stream, cache, PassMoves(cache, moves, pass), fault_key);
    return;
  }
  LaunchChained("StageKernel", op, StageKernel, StageGrid(moves.sort.capacity), kBlockThreads,
                stream, cache, PassMoves(cache, moves, pass), moves.fills, moves.counts, fault_key);
}

void FinishMoves(const CacheArgs& cache, const RowMoves& moves, const char* op,
                 cudaStream_t stream) {
  if (cache.host_fills != nullptr) cache.host_fills->last_fills = 0;
  if (moves.fill_capacity == 0 || CopyEngineFills(cache, moves, op, stream)) return;
  const MissSort sort = PieceSort(moves);
  const int64_t pieces = (moves.fill_capacity + sort.capacity - 1) / sort.capacity;
  const unsigned grid = LinkGrid(cache, sort.capacity, kFillBlockThreads, kFillBlocks, op);
  const unsigned gather_grid = GridFor(sort.capacity, kBlockThreads, 1024);
  unsigned long long* piece_count = &moves.counts->piece;
  Staged staged;
  staged.count = &moves.counts->staged;
  for (int64_t piece = 0; piece < pieces; ++piece) {
    // The rows that earlier passes left in their slots go home first.
    if (MayOverflow(cache, moves) && moves.passes > 1) {
      LaunchChained("GatherWriteBacksKernel", op, GatherWriteBacksKernel, gather_grid,
                    kBlockThreads, stream, cache, moves.fills, moves.counts, sort, piece);
      unsigned long long* write_backs = &moves.counts->write_backs;
      SortByHome(sort, sort.rows, sort.positions, write_backs, sort.capacity, op, stream);
      LaunchChained("WriteBackKernel", op, WriteBackKernel, grid, kFillBlockThreads, stream, cache,
                    sort.rows[0], sort.positions[0], write_backs, sort.fault_key);
    }
    SortPiece(cache, moves, sort, piece, op, stream);
    const bool drains = piece == 0 && cache.staging_capacity > 0;
    if (drains) {
      staged.rows = cache.staged_rows[0];
      staged.at = cache.staged_at[0];
      if (moves.key_starts != nullptr) IndexStaged(cache, staged, moves, op, stream);
    }
    LaunchChained("FillKernel", op, FillKernel, grid, kFillBlockThreads, stream, cache,
                  sort.rows[0], sort.positions[0], piece_count, staged, drains, sort.row_bits,
                  sort.fault_key);
  }
}

}  // namespace ember::cache::internal::cuda
