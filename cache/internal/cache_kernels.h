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
// back what it evicts, and writes the batch's locations. Writes state,
// locations, unlocked slots and evicted rows' home rows; reads home.
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

// Writes every cached row back to its home row; the cache stays valid.
void FlushCpu(const CacheArgs& cache);
// Empties every slot (after a flush). REQUIRES: no lock held.
void ResetCpu(const CacheArgs& cache);
// Fills empty ways with the given rows (linear ids, valid and distinct),
// in order, skipping rows already cached and rows whose set is full.
void WarmCpu(const CacheArgs& cache, const int64_t* rows, int64_t count, int64_t timestep);

// CUDA: the set-up of a new cache: uploads the tables meta (`count`
// values from host memory into `meta`), empties every slot, zeroes the
// `stat_count` statistics at `stats` and the LFU counts.
void InitializeCuda(const CacheArgs& cache, const int64_t* values, int64_t count, int64_t* meta,
                    int64_t* stats, int64_t stat_count, int device, void* stream);
// Whether `home` (a GPU cache's home) is host-mapped memory rather than
// managed memory.
bool HomeIsMappedCuda(const void* home, int device);
// Copies `count` values from device memory to host memory, synchronously
// (statistics, read after a wait).
void ReadDeviceCuda(const int64_t* from, int64_t* to, int64_t count, int device);

// The deferred fills of a GPU prefetch of `num_indices` (each fill of a
// mapped home's prefetch waits for its last pass: at most one per index and
// one per slot), and the bytes of device scratch it takes in `passes`
// passes (a bound of the scratch's layout in prefetch_cuda.cu that grows
// with the indices of a pass, so that it sets the passes for a budget).
// Defined in cache_arrays.cc, for CPU and CUDA builds alike.
inline constexpr int64_t kPrefetchHeaderBytes = 2048;  // a bound of the scratch's header
int64_t PassChunk(int64_t num_indices, int passes);
int64_t DeferredFillCapacity(const CacheArgs& cache, int64_t num_indices);
int64_t PrefetchScratchBytes(const CacheArgs& cache, int64_t num_indices, int passes);
// The entries of the scratch's sort buffers: a pass's misses, or a piece
// of the deferred fills.
int64_t SortEntries(const CacheArgs& cache, int64_t num_indices, int passes);

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
