#pragma once

// CacheStats: what prefetches did, per table and in all, for the last
// prefetch ("step") and since the cache was made. They observe only:
// turning them off (CacheOptions::collect_stats) changes no result.
//
// Counts are of rows of a batch, each the first time a timestep uses it
// (a multi-pass prefetch counts a row again only if it missed the cache in
// an earlier pass too); `requested` and `conflict_miss_indices` count
// indices.
//
// Thread safety: plain values.

#include <cstdint>
#include <vector>

namespace ember::cache {

struct CacheCounts {
  int64_t requested = 0;      // indices looked up
  int64_t unique = 0;         // distinct rows
  int64_t unique_misses = 0;  // of those, not cached when looked up
  int64_t inserted = 0;       // rows filled into the cache
  int64_t evicted = 0;        // rows evicted (and written back home, WriteBack says which)
  // Conflict misses: missed rows left uncached (no way of their set was
  // free, or, with LFU, each free way's row was used more often), read and
  // updated at their home rows. FBGEMM's num_conflict_unique_misses counts
  // the rows and its num_conflict_misses their indices (repeats included),
  // as these two do.
  int64_t unique_conflict_misses = 0;  // distinct rows
  int64_t conflict_miss_indices = 0;   // their indices, repeats included
  int64_t bytes_to_cache = 0;          // home -> cache
  int64_t bytes_to_home = 0;           // cache -> home (write-backs)

  // Distinct rows found in the cache: 1 - unique_misses / unique (1 with
  // no rows).
  [[nodiscard]] double hit_rate() const {
    return unique == 0 ? 1.0
                       : 1.0 - static_cast<double>(unique_misses) / static_cast<double>(unique);
  }
  CacheCounts& operator+=(const CacheCounts& other);
};

struct CacheStats {
  std::vector<CacheCounts> tables;  // one per table
  CacheCounts all;                  // every table
  // Of all.inserted, the rows the copy engines moved (MappedFills::
  // kCopyEngine, cache_options.h); the GPU's warps moved the others (a
  // prefetch of several passes, or of more new rows than the staging
  // holds, falls back to them). 0 for other caches.
  int64_t copy_engine_fills = 0;
};

// The cache's state, slot by slot, copied to the host (CachedTbe::Snapshot):
// what row each slot holds (a linear id, or -1), the last timestep that used
// it, its lock count (the batches in flight using it), and whether it is
// dirty (1: a backward updated its row since it was filled; 0: its home
// row is equal).
struct CacheSnapshot {
  std::vector<int64_t> tags;
  std::vector<int64_t> timestamps;
  std::vector<int32_t> locks;
  std::vector<int32_t> dirty;
};

}  // namespace ember::cache
