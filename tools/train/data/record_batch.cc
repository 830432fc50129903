#include "tools/train/data/record_batch.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>

namespace ember::train {
namespace {

// log(1 + x) of a count x >= 0: false for NaN, negatives and infinity.
bool IsTransformedCount(float v) { return v >= 0.0f && v <= std::numeric_limits<float>::max(); }

constexpr uint32_t kInfinityBits = 0x7f800000;  // +inf's; NaNs and negatives lie above

}  // namespace

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
    // One unsigned max over the record's dense bits, which vectorizes
    // (a float comparison of each copied value cost the copy about 18%,
    // this about 1%): bits below infinity's are a finite value with the
    // sign clear. Past it, the float test finds the feature (and lets -0.0
    // pass).
    uint32_t most = 0;
    for (int j = 0; j < num_dense; ++j) {
      uint32_t bits;
      std::memcpy(&bits, record + 4 + 4 * int64_t{j}, sizeof(bits));
      most = std::max(most, bits);
    }
    if (most >= kInfinityBits) {
      for (int j = 0; j < num_dense; ++j) {
        if (!IsTransformedCount(row_dense[j])) {
          return RecordFault{
              .record = r, .field = RecordFault::Field::kDense, .index = j, .value = row_dense[j]};
        }
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
