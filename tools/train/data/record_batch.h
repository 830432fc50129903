#pragma once

// Packed records into a HostBatch: what the Criteo sources share. A record
// is, little-endian and 4-byte aligned,
//   f32 label, f32 dense[num_dense], u32 sparse[num_tables]
// (CriteoRecord for Criteo's 13 and 26; the binary format's record), one
// index per bag: the batch's offsets are 0, 1, ..., T * B.
//
// Thread safety: pure functions over the caller's memory.

#include <cstddef>
#include <cstdint>
#include <optional>

#include "tools/train/data/batch_builder.h"
#include "tools/train/data/batch_source.h"

namespace ember::train {

// Bytes of one record.
[[nodiscard]] constexpr int64_t RecordBytes(int num_dense, int num_tables) {
  return 4 * (1 + int64_t{num_dense} + num_tables);
}

// Sets the builder's offsets to one index per bag and allocates its T * B
// indices. Throws like BatchBuilder::AllocateIndices.
void StartRecordBatch(BatchBuilder& builder);

// A record that cannot be right: its label is not 0 or 1, a dense value
// is not a transformed count (log(1 + x) of x >= 0: finite and not
// negative; a NaN would pass through the bottom MLP's ReLU as 0 and train
// its weights into NaN unseen), or a row is not below its table's rows.
struct RecordFault {
  enum class Field { kLabel, kDense, kRow };
  int64_t record = 0;  // index among the records given
  Field field = Field::kLabel;
  int index = 0;       // kDense: the feature; kRow: the table
  float value = 0.0f;  // kLabel, kDense
  uint32_t row = 0;    // kRow
};

// Copies `count` packed records into examples [first, first + count) of a
// builder that StartRecordBatch set up, checking each; returns the first
// fault (the records before it are copied), else nullopt. REQUIRES:
// records 4-byte aligned, first + count <= builder.batch_size().
[[nodiscard]] std::optional<RecordFault> CopyRecords(BatchBuilder& builder, int64_t first,
                                                     const std::byte* records, int64_t count,
                                                     const DataSpec& spec);

}  // namespace ember::train
