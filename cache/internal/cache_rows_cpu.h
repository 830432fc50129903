#pragma once

// Helpers of the CPU kernels: where a row lives, copying one, and turning a
// batch into linear ids with the same validation (and messages) as ops'
// TBE kernels.
//
// Thread safety: pure functions.

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "cache/internal/cache_args.h"
#include "cache/internal/cache_rows.h"

namespace ember::cache::internal {

// The home row of `linear_id`, of table `table` (TableOf) where the caller
// has it already.
inline char* HomeRow(const CacheArgs& cache, int table, int64_t linear_id) {
  const int64_t element =
      cache.weight_offsets[table] + (linear_id - cache.row_offsets[table]) * cache.dims[table];
  return static_cast<char*>(cache.home) + element * ElementBytes(cache.row_type);
}
inline void* HomeRow(const CacheArgs& cache, int64_t linear_id) {
  return HomeRow(cache, TableOf(cache, linear_id), linear_id);
}

inline void* SlotRow(const CacheArgs& cache, int64_t slot) {
  return static_cast<char*>(cache.slots) + slot * SlotBytes(cache);
}

inline void CopyRow(const CacheArgs& cache, const void* from, void* to, int64_t dim) {
  std::memcpy(to, from, static_cast<std::size_t>(dim * ElementBytes(cache.row_type)));
}

// The batch's linear ids, one per index. Throws InvalidArgument naming the
// table, the bag and the value (op `op`) for a bad offset or index, before
// anything is changed.
std::vector<int64_t> Linearize(const CacheArgs& cache, const BatchArgs& batch, std::string_view op);

}  // namespace ember::cache::internal
