#pragma once

// One line of Criteo's public click logs (the Kaggle Display Advertising
// Challenge's train.txt, the Terabyte logs' day_N files), parsed and
// transformed as DLRM does.
//
// Layout: 40 fields separated by tabs: the label (0 or 1), 13 integer
// features, 26 categorical features (32-bit values as hexadecimal strings,
// e.g. "68fd1e64"). Any feature may be empty; the label may not. Fields are
// numbered from 1 (field 1 is the label, 2-14 the integers, 15-40 the
// categoricals) in messages.
//
// Transform (as DLRM's data loader; docs/train.md, "Data"):
//  - integer x: dense = log(1 + max(x, 0)); empty is 0 (so dense 0). DLRM
//    clamps negative values to 0 before the log; so do we.
//  - categorical: the hex value v (at most 8 hex digits, either case) goes
//    to row v mod rows[t] of table t, as DLRM's --max-ind-range and
//    TorchRec's Criteo preprocessing do (Criteo's values are already
//    hashes, so the modulus is the whole hash: rows then match theirs).
//    Empty is v = 0 (DLRM reads a missing value as "0"), so row 0.
//
// Thread safety: pure functions.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace ember::train {

inline constexpr int kCriteoNumDense = 13;
inline constexpr int kCriteoNumSparse = 26;
inline constexpr int kCriteoNumFields = 1 + kCriteoNumDense + kCriteoNumSparse;  // 40

// One example after the transform; also the record of the binary format
// (criteo_binary_format.h) for 13 dense features and 26 tables.
struct CriteoRecord {
  float label;                        // 0 or 1
  float dense[kCriteoNumDense];       // log(1 + max(x, 0))
  uint32_t sparse[kCriteoNumSparse];  // the row in table t: v mod rows[t]
};
static_assert(sizeof(CriteoRecord) == std::size_t{4} * (1 + kCriteoNumDense + kCriteoNumSparse));

// What is wrong with a line: a field (1-based) and why, or the line's
// field count (field 0). Views into the parsed line and static text.
struct CriteoLineError {
  int field = 0;
  std::string_view text;    // the field's text
  std::string_view reason;  // e.g. "not a hexadecimal number"
  int64_t num_fields = 0;   // field 0: how many fields the line has
};

// Parses `line` (without its newline) into *record, table t's value
// hashed into rows[t] rows. Returns nullopt when the line is good, else
// its first error (and *record is partly written). Never throws or
// allocates. REQUIRES: rows.size() == kCriteoNumSparse, every rows[t] >= 1.
[[nodiscard]] std::optional<CriteoLineError> ParseCriteoLine(std::string_view line,
                                                             std::span<const int64_t> rows,
                                                             CriteoRecord* record);

// The error in words, e.g. "field 15 ('zz12'): not a hexadecimal number"
// or "has 38 fields; a Criteo line has 40". A long or unprintable text is
// shortened and escaped.
[[nodiscard]] std::string DescribeCriteoLineError(const CriteoLineError& error);

// The dense transform of integer feature x.
[[nodiscard]] float CriteoDense(int64_t x);
// The row of categorical value v in a table of `rows` rows.
[[nodiscard]] inline uint32_t CriteoRow(uint32_t v, int64_t rows) {
  return static_cast<uint32_t>(static_cast<uint64_t>(v) % static_cast<uint64_t>(rows));
}

}  // namespace ember::train
