#pragma once

// The binary form of a Criteo click log: records already transformed and
// hashed, fixed-size, so that a reader maps the file and copies (docs/
// train.md, "Data", has the layout). Little-endian throughout:
//
//   offset  bytes  field
//        0      8  magic "EMBERCRT"
//        8      4  u32 version (1)
//       12      4  u32 header_bytes: where the first record starts
//                  (64 + 8 * num_tables, rounded up to a multiple of 64)
//       16      4  u32 num_dense (13 for Criteo)
//       20      4  u32 num_tables (26 for Criteo)
//       24      4  u32 record_bytes = 4 * (1 + num_dense + num_tables)
//       28      4  u32 reserved, 0
//       32      8  u64 num_examples
//       40      8  u64 skipped_lines: bad lines the converter skipped (info)
//       48     16  reserved, 0
//       64  8 * T  u64 rows[t]: the table sizes the values were hashed into
//                  (a reader refuses a file hashed for other tables)
//           ...    zeros up to header_bytes
//   header_bytes   num_examples records of record_bytes:
//                  f32 label (0 or 1), f32 dense[num_dense] (log(1 + x)),
//                  u32 sparse[num_tables] (row v mod rows[t])
//
// A file is exactly header_bytes + num_examples * record_bytes long.
//
// Thread safety: the functions are pure; a writer is used by one thread.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "tools/train/data/batch_source.h"
#include "tools/train/data/criteo_line.h"

namespace ember::train {

inline constexpr char kCriteoBinaryMagic[8] = {'E', 'M', 'B', 'E', 'R', 'C', 'R', 'T'};
inline constexpr uint32_t kCriteoBinaryVersion = 1;
inline constexpr int64_t kCriteoBinaryFixedHeader = 64;

struct CriteoBinaryHeader {
  uint32_t version = kCriteoBinaryVersion;
  int num_dense = kCriteoNumDense;
  std::vector<int64_t> rows;
  int64_t num_examples = 0;
  int64_t skipped_lines = 0;

  [[nodiscard]] int num_tables() const { return static_cast<int>(rows.size()); }
  [[nodiscard]] int64_t header_bytes() const;
  [[nodiscard]] int64_t record_bytes() const;
  // header_bytes() + num_examples * record_bytes().
  [[nodiscard]] int64_t file_bytes() const;
};

// The header's header_bytes() bytes.
[[nodiscard]] std::vector<std::byte> EncodeCriteoBinaryHeader(const CriteoBinaryHeader& header);

// Decodes the header at the start of a file of `file_bytes` bytes, of which
// `bytes` are at hand (at least min(file_bytes, the header's size)).
// Throws InvalidArgument naming `path` for a file that is too short for its
// header, a bad magic, an unknown version, inconsistent sizes, or a size
// other than the header promises (naming expected and actual bytes).
[[nodiscard]] CriteoBinaryHeader DecodeCriteoBinaryHeader(const std::string& path,
                                                          std::span<const std::byte> bytes,
                                                          int64_t file_bytes);

// Throws InvalidArgument naming `path` and each difference when the file's
// dense count, table count or table sizes are not the model's.
void CheckCriteoBinaryHeader(const std::string& path, const CriteoBinaryHeader& header,
                             const DataSpec& spec);

// CriteoBinaryWriter: writes a file of CriteoRecords. It writes to
// `path` + ".tmp" and renames that into place at Finish, so that `path`
// never holds a partial file; destroying it unfinished removes the
// temporary file.
class CriteoBinaryWriter {
 public:
  // Throws InvalidArgument for rows that are not 26 positive sizes, or a
  // temporary file that cannot be created (naming it and why).
  CriteoBinaryWriter(std::string path, std::vector<int64_t> rows);
  ~CriteoBinaryWriter();
  CriteoBinaryWriter(const CriteoBinaryWriter&) = delete;
  CriteoBinaryWriter& operator=(const CriteoBinaryWriter&) = delete;

  // Appends one record (buffered). Throws Error on a failed write.
  void Append(const CriteoRecord& record);
  [[nodiscard]] int64_t examples() const { return header_.num_examples; }
  // Writes the header, closes the file and renames it to `path`. Throws
  // Error on a failed write or rename.
  void Finish(int64_t skipped_lines);

 private:
  void Flush();
  void Write(const void* data, size_t bytes);

  const std::string path_;
  const std::string tmp_path_;
  CriteoBinaryHeader header_;
  std::FILE* file_ = nullptr;
  std::vector<std::byte> buffer_;
  size_t used_ = 0;
};

}  // namespace ember::train
