#pragma once

// Small functions on CacheArgs that the CPU kernels and the CUDA kernels
// share (host and device), so that both find rows, name tables and order
// victims the same way: TableOf, FindSlot and VictimKey. The CPU kernels'
// own helpers are in cache_rows_cpu.h.
//
// Thread safety: pure functions (FindSlot reads the state it is given).

#include <cstdint>

#include "cache/internal/cache_args.h"

#if defined(__CUDACC__)
#define EMBER_CACHE_HD __host__ __device__
#else
#define EMBER_CACHE_HD
#endif

namespace ember::cache::internal {

// The table of a linear id: the last table whose first row is <= it.
EMBER_CACHE_HD inline int TableOf(const CacheArgs& cache, int64_t linear_id) {
  int lo = 0;
  int hi = cache.num_tables - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (cache.row_offsets[mid] <= linear_id) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// The slot holding `linear_id`, or -1.
EMBER_CACHE_HD inline int64_t FindSlot(const CacheArgs& cache, int64_t linear_id) {
  const int64_t first = SetOf(linear_id, cache.num_sets) * kWays;
  for (int w = 0; w < kWays; ++w) {
    if (cache.tags[first + w] == linear_id) return first + w;
  }
  return -1;
}

// Victims sort by this key, smallest first (cache_args.h, invariant 4).
struct VictimOrder {
  int64_t count;      // LFU: the cached row's count (-1 for an empty way)
  int64_t timestamp;  // the last timestep that used the way
  int64_t slot;       // ties: the lower way
  EMBER_CACHE_HD friend bool operator<(const VictimOrder& a, const VictimOrder& b) {
    if (a.count != b.count) return a.count < b.count;
    if (a.timestamp != b.timestamp) return a.timestamp < b.timestamp;
    return a.slot < b.slot;
  }
};

EMBER_CACHE_HD inline VictimOrder VictimKey(const CacheArgs& cache, int64_t slot) {
  const int64_t tag = cache.tags[slot];
  const int64_t count = cache.policy == Policy::kLfu ? (tag == kEmpty ? -1 : cache.counts[tag]) : 0;
  return {count, cache.timestamps[slot], slot};
}

EMBER_CACHE_HD inline int ElementBytes(RowType type) { return type == RowType::kF32 ? 4 : 2; }

EMBER_CACHE_HD inline int64_t RowBytes(const CacheArgs& cache, int table) {
  return cache.dims[table] * ElementBytes(cache.row_type);
}

// A slot's (and a staging row's) bytes: the widest table's row.
EMBER_CACHE_HD inline int64_t SlotBytes(const CacheArgs& cache) {
  return cache.slot_dim * ElementBytes(cache.row_type);
}

}  // namespace ember::cache::internal
