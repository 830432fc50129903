#include "tools/train/data/record_batch.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>

namespace ember::train {

void StartRecordBatch(BatchBuilder& builder) {
  const int64_t bags = builder.batch_size() * builder.num_tables();
  int64_t* offsets = builder.offsets();
  for (int64_t i = 0; i <= bags; ++i) offsets[i] = i;
  (void)builder.AllocateIndices(bags);
}

std::optional<RecordFault> CopyRecords(BatchBuilder& builder, int64_t first,
                                       const std::byte* records, int64_t count,
                                       const DataSpec& spec) {
  const int num_dense = spec.num_dense;
  const int num_tables = spec.num_tables();
  const int64_t stride = RecordBytes(num_dense, num_tables);
  const int64_t batch = builder.batch_size();
  float* labels = builder.labels() + first;
  float* dense = builder.dense() + first * num_dense;
  int64_t* indices = builder.indices() + first;
  for (int64_t r = 0; r < count; ++r) {
    const std::byte* record = records + r * stride;
    float label;
    std::memcpy(&label, record, sizeof(label));
    if (label != 0.0f && label != 1.0f) {
      return RecordFault{.record = r, .field = RecordFault::Field::kLabel, .value = label};
    }
    labels[r] = label;
    float* row_dense = dense + r * num_dense;
    std::memcpy(row_dense, record + 4, sizeof(float) * num_dense);
    for (int j = 0; j < num_dense; ++j) {
      // One comparison each: false for NaN, negatives and infinity.
      if (!(row_dense[j] >= 0.0f && row_dense[j] <= std::numeric_limits<float>::max())) {
        return RecordFault{
            .record = r, .field = RecordFault::Field::kDense, .index = j, .value = row_dense[j]};
      }
    }
    const std::byte* sparse = record + 4 + 4 * int64_t{num_dense};
    for (int t = 0; t < num_tables; ++t) {
      uint32_t value;
      std::memcpy(&value, sparse + 4 * int64_t{t}, sizeof(value));
      if (value >= static_cast<uint64_t>(spec.rows[t])) {
        return RecordFault{
            .record = r, .field = RecordFault::Field::kRow, .index = t, .row = value};
      }
      // Table-major: bag b of table t is index t * B + b.
      indices[t * batch + r] = value;
    }
  }
  return std::nullopt;
}

}  // namespace ember::train
