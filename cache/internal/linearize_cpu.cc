// Linearize (cache_rows_cpu.h): a batch's indices as linear ids, checked
// bag by bag as ops' CPU TBE kernels check them.

#include <string>

#include "cache/internal/batch_fault.h"
#include "cache/internal/cache_rows_cpu.h"

namespace ember::cache::internal {

std::vector<int64_t> Linearize(const CacheArgs& cache, const BatchArgs& batch,
                               std::string_view op) {
  const std::string name(op);
  const int64_t bags = cache.num_tables * batch.batch_size;
  for (int64_t j = 0; j <= bags; ++j) {
    const BatchFault fault = CheckOffset(batch, cache.num_tables, j);
    if (fault.kind != kNoFault) ThrowBatchFault(name.c_str(), fault);
  }
  std::vector<int64_t> linear(static_cast<std::size_t>(batch.num_indices));
  for (int64_t j = 0; j < bags; ++j) {
    const int table = static_cast<int>(j / batch.batch_size);
    for (int64_t k = OffsetAt(batch, j); k < OffsetAt(batch, j + 1); ++k) {
      const int64_t index = IndexAt(batch, k);
      if (index < 0 || index >= cache.rows[table]) {
        ThrowBatchFault(name.c_str(), BatchFault{kIndexOutOfRange, table, j % batch.batch_size, k,
                                                 index, cache.rows[table]});
      }
      linear[k] = cache.row_offsets[table] + index;
    }
  }
  return linear;
}

}  // namespace ember::cache::internal
