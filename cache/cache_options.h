#pragma once

// CacheOptions: how a CachedTbe is sized and placed, and how it chooses
// what to keep.
//
// Sizing. The cache holds sets x 32 ways (slots), each a row of the largest
// dim. `cache_bytes`, when set, is a budget for the slots and their state;
// otherwise `load_factor` x the tables' total rows are cached (truncated to
// whole rows, then rounded up to whole sets, as FBGEMM sizes its cache).
// Either way at least one set: a budget below one set is an InvalidArgument.
//
// Thread safety: plain values.

#include <cstdint>

#include "engine/context.h"
#include "storage/dtype.h"

namespace ember::cache {

// Sizing in numbers: the ways of a set, and the bytes one way takes on its
// device (a row of `dim` elements of `dtype`, then a tag, a timestamp and a
// lock), so that a caller can work out a budget without making a cache.
inline constexpr int kCacheWays = 32;
inline constexpr int64_t kCacheStateBytesPerSlot = 8 + 8 + 4;
inline int64_t CacheSlotBytes(int64_t dim, storage::DType dtype) {
  return dim * static_cast<int64_t>(storage::SizeOf(dtype)) + kCacheStateBytesPerSlot;
}

enum class CachePolicy {
  kLru,  // evict the way used longest ago
  // FBGEMM's LFU: each row counts its indices (every index of every
  // prefetched batch, since creation or the last Reset); a miss is
  // inserted only over a way whose row counts no more than it (an empty
  // way always), the set's misses with the largest counts first against
  // the least used ways first (then the oldest). Other misses are conflict
  // misses, read and updated at home.
  kLfu,
};

// What goes home from a slot when its row is evicted, and at a flush.
enum class WriteBack {
  // Every cached row, as FBGEMM's cache does: an evicted or flushed row is
  // written home whether or not a backward changed it.
  kEveryRow,
  // Only the rows a backward updated since their fill (dirty); the others
  // equal their home rows. A run that prefetches without training
  // (evaluation, inference) then moves rows one way only.
  kDirtyRows,
};

// Where every row (the "home" of the rows) lives.
enum class HomeMemory {
  // On a GPU: managed memory when the rows fit in half of the GPU's free
  // memory, host-mapped pinned memory otherwise. On the CPU: host memory.
  // Managed memory is the faster home: the GPU reads its random rows at
  // the link's rate, where pinned memory larger than the GPU's address
  // translation reach costs a translation per row (docs/cache.md, Layout).
  kAuto,
  kManaged,  // cudaMallocManaged; refused beyond the GPU's free memory
  kMapped,   // host-mapped pinned memory (cudaHostAllocMapped)
};

// How a GPU prefetch moves the rows of a host-mapped home (kMapped, or
// kAuto's choice of it).
enum class MappedFills {
  // The GPU's warps copy the rows over the link (zero-copy loads and stores
  // of host memory): no host work, but while they run the step's kernels
  // beside them slow down (an SGEMM 3.4x on an H100).
  kWarps,
  // The copy engines move the new rows: `fill_threads` host threads
  // gather them into pinned memory, one copy brings them in and a kernel
  // scatters them into their slots, while the warps write the evicted rows
  // home (stores, which are posted). The price is a round trip to the host
  // inside the prefetch and pinned host memory of the staging's size; a
  // prefetch alone is slower, a training step beside it may be faster (the
  // SMs' reads of host memory slow the step) or slower (the prefetch waits
  // for its slowest host thread): measure on the host that will train
  // (docs/benchmarks.md, "Copy-engine fills"). A prefetch of several
  // passes, or with more new rows than staging rows, moves them as kWarps.
  kCopyEngine,
};

struct CacheOptions {
  // Where the cache and its ops live: a GPU (slots in device memory) or the
  // CPU (slots in host memory).
  engine::Context ctx = engine::Context::CPU();
  storage::DType dtype = storage::DType::kF32;  // of the rows: f32, f16 or bf16
  double load_factor = 0.2;                     // cached rows / total rows, when cache_bytes is 0
  int64_t cache_bytes = 0;                      // a budget for slots and state instead
  CachePolicy policy = CachePolicy::kLru;
  HomeMemory home = HomeMemory::kAuto;
  // Multi-pass prefetch: `prefetch_passes` passes over chunks of the batch's
  // indices, or, when prefetch_temp_bytes is set, as many as keep the
  // prefetch's temporaries within that many bytes.
  int prefetch_passes = 1;
  int64_t prefetch_temp_bytes = 0;
  // Statistics cost a few counter updates per row; off, they read zero.
  bool collect_stats = true;
  // The flags that kDirtyRows reads are kept either way: 4 bytes a slot,
  // beyond cache_bytes.
  WriteBack write_back = WriteBack::kEveryRow;
  // A GPU cache with a host-mapped home: device memory (beyond cache_bytes)
  // where a prefetch parks the rows it evicts, so that writing them home
  // and reading the new rows in share the link at once rather than take
  // turns (an H100 moved 41 GB/s each way at once against 52-54 GB/s one
  // way at a time: 1.5x less time for both). Evictions beyond it in one
  // prefetch are written home first, as with 0 (no staging). Each staging
  // row costs its slot's bytes and 24 more; a mapped home adds 8 bytes a
  // slot in any case (docs/cache.md).
  int64_t staging_bytes = int64_t{128} << 20;
  // A GPU cache: the most warps of the kernels that move its rows over the
  // link (fills and write-backs; at least one block of such a kernel, two
  // or four warps), 0 for each kernel's default: a block of four warps on
  // every SM for a mapped home, 66 blocks of two for a managed one.
  // Those warps hold their SMs' memory pipelines for the whole prefetch, so
  // a prefetch beside the step's compute (a pipelined schedule) slows the
  // step's kernels more than its rows need: with a mapped home, 96 warps
  // made the prefetch schedule's step 1.16x shorter on an H100, and the
  // prefetch alone 1.4x slower (docs/benchmarks.md, "The link-bound
  // kernels' warps").
  int link_warps = 0;
  // A GPU cache with a host-mapped home: how its prefetches move rows, and
  // with kCopyEngine the host threads that move them (1 to 64, the
  // prefetch's own thread counted).
  MappedFills mapped_fills = MappedFills::kWarps;
  int fill_threads = 8;
};

}  // namespace ember::cache
