#pragma once

// The rows a GPU prefetch moves (move_rows_cuda.cu): each pass's insert
// lists its fills as moves (a slot and the row it evicts), and these
// functions copy the evicted rows home and the new rows in.
//
// A managed home is mapped in large pages: each pass moves its rows at
// once, both ways in one kernel, unsorted.
//
// A host-mapped home is read and written through small address
// translations, so its rows move in home order, densely: a pass only takes
// its evicted rows out of their slots into the staging, and lists every
// fill (its slot, and whether its evicted row found no staging row), and
// the fills of every pass wait for the prefetch's end. There, piece by
// piece of the list, the evicted rows the staging had no room for go home
// from their slots (the last pass's went at once), then the new rows are
// copied in while the staged rows go home, each sorted into home order
// across all passes. Deferring them is
// safe because a slot is filled at most once per timestep (a filled slot
// is no victim for a later pass), so each slot still holds its evicted row
// until its fill; the one row that can be both evicted and filled (evicted
// by one pass, missed and inserted elsewhere by a later one) is filled
// from its staged copy, or from home after its write-back (its new slot
// comes later in the list, so in the same piece or a later one).
//
// Thread safety: launches on the caller's stream.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cache/internal/cache_args.h"
#include "cache/internal/cache_cuda.cuh"

namespace ember::cache::internal::cuda {

// A prefetch's counters in device memory, zeroed by its first kernel.
struct MoveCounts {
  unsigned long long moves;          // this pass's moves
  unsigned long long fills;          // deferred fills of the passes before this one
  unsigned long long staged;         // evicted rows given a staging row (may pass its capacity)
  unsigned long long piece;          // fills of the piece being copied
  unsigned long long write_backs;    // its write-backs (zero before each piece)
  unsigned long long staged_before;  // `staged` as this pass began, at most the capacity
  // This pass's evicted rows by HomeBin, where the staging may overflow:
  // the rows of the lowest bins take the staging, so that those written
  // home from their slots lie together in home memory.
  unsigned evicted_in_bin[kHomeBins];
};

// Block 0 of a pass's first kernel (kBlockThreads threads), after the last
// pass's moves: their fills counted, this pass's moves started.
__device__ inline void BeginPassMoves(MoveCounts* counts, int64_t staging_capacity) {
  static_assert(kBlockThreads >= kHomeBins);
  if (threadIdx.x < kHomeBins) counts->evicted_in_bin[threadIdx.x] = 0;
  if (threadIdx.x != 0) return;
  counts->fills += counts->moves;
  counts->moves = 0;
  const auto capacity = static_cast<unsigned long long>(staging_capacity);
  counts->staged_before = counts->staged < capacity ? counts->staged : capacity;
}

// A pass's moves, listed by its insert: the slot and the row it evicts
// (kEmpty: none; the new row is the slot's tag), and the evicted rows
// counted by HomeBin where the staging may overflow.
struct Moves {
  unsigned long long* count = nullptr;
  int64_t* rows = nullptr;
  uint32_t* slots = nullptr;
  unsigned* evicted_in_bin = nullptr;  // null: not counted
  int row_bits = 0;                    // of HomeBin
  // The staging rows this pass and those before may take: an equal share
  // a pass, so that every pass writes the rows of its highest home bins
  // home, which then lie together.
  int64_t staging_limit = 0;
  bool last_pass = true;  // evicted rows without a staging row go home at once
};

// A prefetch's row moves: its counters, and the scratch they use.
struct RowMoves {
  MoveCounts* counts = nullptr;
  // The two buffers of `sort.capacity` entries (a pass's size) that hold a
  // pass's misses and moves, and then the pieces of the deferred fills;
  // sort.tile_counts serve the staged rows' sort as well.
  MissSort sort;
  uint32_t* fills = nullptr;  // fill_capacity entries
  // With several passes (a fill may be of a row an earlier pass staged):
  // kHomeKeys entries, where the staged rows of each home key start.
  uint32_t* key_starts = nullptr;
  // PrefetchScratchPlan's sort_entries and fills (cache_kernels.h).
  int64_t piece_capacity = 0;  // entries of a piece of the deferred fills
  int64_t fill_capacity = 0;   // 0: a managed home
  int passes = 1;
};

// Where pass `pass` lists its moves: buffer 1 of moves.sort (buffer 0 holds
// the sorted misses).
Moves PassMoves(const CacheArgs& cache, const RowMoves& moves, int pass);

// After a pass's insert, its moves in buffer 1 of moves.sort (buffer 0
// free): a managed home's rows moved, or a mapped home's evicted rows taken
// out.
void MovePassRows(const CacheArgs& cache, const RowMoves& moves, int pass, const char* op,
                  cudaStream_t stream);

// After the last pass: a mapped home's deferred fills copied in and its
// staged rows written home (nothing for a managed home).
void FinishMoves(const CacheArgs& cache, const RowMoves& moves, const char* op,
                 cudaStream_t stream);

}  // namespace ember::cache::internal::cuda
