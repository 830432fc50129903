#pragma once

// The cache's kernels on CacheArgs (cache_args.h), CPU and CUDA alike. The
// CPU ones run to completion on the calling thread; the CUDA ones enqueue
// on `stream` (a cudaStream_t of GPU `device`) and return, reporting a bad
// batch through `fault` (a TbeFault record in host-mapped memory the
// caller reads after the stream passed the launch) instead of throwing. A
// build without CUDA links stubs that throw Unavailable.
//
// Each kernel states what it writes; the push functions in cached_tbe.cc
// declare the matching vars (cache_args.h, invariants).
//
// Thread safety: reentrant; the engine orders calls on one cache.

#include <cstdint>

#include "cache/internal/batch_fault.h"
#include "cache/internal/cache_args.h"

namespace ember::cache::internal {

// Prefetch of a batch at `timestep` in `passes` passes over index chunks:
// locks the slots of the rows it finds, inserts the misses it can, writes
// back the rows it evicts (or only the dirty ones), and writes the batch's
// locations. Writes
// state, dirty flags, locations, unlocked slots and evicted rows' home
// rows; reads home.
// CPU: throws InvalidArgument for a bad batch, before changing anything.
void PrefetchCpu(const CacheArgs& cache, const BatchArgs& batch, const LocationArgs& where,
                 int64_t timestep, int passes);

// Releases the batch's locks (the slots in where.locked) and looks its rows
// up again: each index gets the slot now holding its row, or kMiss. Writes
// state (locks) and locations.
void RelookupCpu(const CacheArgs& cache, const BatchArgs& batch, const LocationArgs& where);

// Looks the batch up without locking or inserting (inference). Writes
// locations; reads state. Throws InvalidArgument for a bad batch.
void LookupCpu(const CacheArgs& cache, const BatchArgs& batch, const LocationArgs& where);

// Writes every cached row (or, under WriteBack::kDirtyRows, every dirty
// one) back to its home row and marks it clean; the cache stays valid.
void FlushCpu(const CacheArgs& cache);
// Empties every slot and clears its flag (after a flush), and zeroes LFU's
// counts (as FBGEMM's reset_cache_states). REQUIRES: no lock held.
void ResetCpu(const CacheArgs& cache);
// Fills empty ways with the given rows (linear ids, valid and distinct),
// in order, skipping rows already cached and rows whose set is full.
void WarmCpu(const CacheArgs& cache, const int64_t* rows, int64_t count, int64_t timestep);

// CUDA: the set-up of a new cache: uploads the tables meta (`count`
// values from host memory into `meta`), empties every slot, zeroes the
// `stat_count` statistics at `stats` and the LFU counts.
void InitializeCuda(const CacheArgs& cache, const int64_t* values, int64_t count, int64_t* meta,
                    int64_t* stats, int64_t stat_count, int device, void* stream);
// CUDA: zeroes `count` i64 values (a new CacheLocations) on `stream`.
void ZeroCuda(int64_t* values, int64_t count, int device, void* stream);
// Whether `home` (a GPU cache's home) is host-mapped memory rather than
// managed memory.
bool HomeIsMappedCuda(const void* home, int device);
// Copies `bytes` from device memory to host memory, synchronously
// (statistics and the slots' arrays, read after a wait).
void ReadDeviceCuda(const void* from, void* to, int64_t bytes, int device);

// Home order's keys: the top kHomeKeyBits bits of a linear id, spans of
// home memory that the GPU translates together (cache_cuda.cuh, HomeKey).
inline constexpr int kHomeKeyBits = 16;
inline constexpr int64_t kHomeKeys = int64_t{1} << kHomeKeyBits;

// How a GPU prefetch of some indices in some passes uses its device
// scratch: prefetch_cuda.cu carves it, PrefetchScratchBytes bounds it.
// Defined in cache_arrays.cc, for CPU and CUDA builds alike, so that a
// budget picks the same passes for both.
struct PrefetchScratchPlan {
  int64_t chunk = 0;  // indices a pass
  int passes = 0;     // the passes that run (chunks of the batch)
  // Entries of the two sort buffers: a pass's misses and moves, or a piece
  // of a mapped home's deferred fills (1.5 passes: a piece's rows read the
  // denser in home memory the more they are).
  int64_t sort_entries = 0;
  int64_t largest_sort = 0;   // entries (the tile counts): a buffer's, or the staging's
  int64_t fills = 0;          // deferred fills: each of a mapped home's (one an index, a slot)
  bool staged_index = false;  // kHomeKeys entries: a fill may be of a row an earlier pass staged
};
inline constexpr int64_t kPrefetchHeaderBytes = 2048;  // a bound of the scratch's header
// The miss sort's tiles (miss_sort_cuda.cu): a block sorts up to kMissTile
// entries alone; more are sorted by digits, tile by tile, with two buffers
// of 256 counts a tile.
inline constexpr int kMissTile = 2048;
inline int64_t MissTileCountBytes(int64_t capacity) {
  return capacity > kMissTile ? 2 * ((capacity + kMissTile - 1) / kMissTile * 256 * 4) : 0;
}
PrefetchScratchPlan PlanPrefetchScratch(const CacheArgs& cache, int64_t num_indices, int passes);
// A bound of the plan's bytes that grows with the indices of a pass, so
// that it sets the passes for a budget.
int64_t PrefetchScratchBytes(const CacheArgs& cache, int64_t num_indices, int passes);

// CUDA twins (cache_cuda.cu). `scratch` is device memory of at least
// PrefetchScratchBytes(...) bytes, reused across passes.
void PrefetchCuda(const CacheArgs& cache, const BatchArgs& batch, const LocationArgs& where,
                  int64_t timestep, int passes, void* scratch, int64_t scratch_bytes,
                  BatchFault* fault, int device, void* stream);
void RelookupCuda(const CacheArgs& cache, const BatchArgs& batch, const LocationArgs& where,
                  int device, void* stream);
void LookupCuda(const CacheArgs& cache, const BatchArgs& batch, const LocationArgs& where,
                BatchFault* fault, int device, void* stream);
void FlushCuda(const CacheArgs& cache, int device, void* stream);
void ResetCuda(const CacheArgs& cache, int device, void* stream);
void WarmCuda(const CacheArgs& cache, const int64_t* rows, int64_t count, int64_t timestep,
              int device, void* stream);

}  // namespace ember::cache::internal
