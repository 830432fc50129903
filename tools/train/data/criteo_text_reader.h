#pragma once

// CriteoTextReader: reads Criteo TSV files (criteo_line.h) one after the
// other, record by record, in large chunks (4 MiB reads; no allocation per
// line or field). What CriteoTextSource and ConvertCriteoText share.
//
// Lines end with '\n'; a '\r' before it is dropped, and the last line
// needs no '\n'. A bad line (or an unreadable file) is an InvalidArgument
// naming `who`, the file, the line (from 1) and the field, e.g.
//   "[CriteoTextSource] day_0.tsv:1234: field 15 ('zz12'): not a hexadecimal number".
// With skip_bad_lines, bad lines are instead counted (skipped_lines()) and
// the first few logged; nothing is dropped without being counted.
//
// Thread safety: one thread at a time.

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tools/train/data/criteo_line.h"

namespace ember::train {

class CriteoTextReader {
 public:
  // Opens nothing yet. Throws InvalidArgument for no paths, or rows that
  // are not kCriteoNumSparse positive sizes. `who` starts every message.
  CriteoTextReader(std::vector<std::string> paths, std::vector<int64_t> rows, bool skip_bad_lines,
                   std::string who);
  ~CriteoTextReader();
  CriteoTextReader(const CriteoTextReader&) = delete;
  CriteoTextReader& operator=(const CriteoTextReader&) = delete;

  // Reads the next good record into *record; false at the end of the last
  // file. Throws InvalidArgument for a bad line (unless skipping) or a file
  // that cannot be opened or read; the reader then stands after that line.
  [[nodiscard]] bool Next(CriteoRecord* record);
  // Back to the first line of the first file; counters restart.
  void Rewind();

  [[nodiscard]] const std::vector<std::string>& paths() const { return paths_; }
  [[nodiscard]] const std::vector<int64_t>& rows() const { return rows_; }
  // Good records read since the start (or Rewind).
  [[nodiscard]] int64_t records() const { return records_; }
  // Bad lines skipped since the start (or Rewind).
  [[nodiscard]] int64_t skipped_lines() const { return skipped_lines_; }
  // Bytes of the files consumed so far (for progress).
  [[nodiscard]] int64_t bytes_read() const { return bytes_done_ + file_bytes_; }

 private:
  // The next line of the current file into *line (without '\n' or '\r');
  // false at its end.
  bool NextLine(std::string_view* line);
  bool OpenNext();  // the next file; false after the last
  void CloseFile();
  [[noreturn]] void Fail(const std::string& what) const;

  const std::vector<std::string> paths_;
  const std::vector<int64_t> rows_;
  const bool skip_bad_lines_;
  const std::string who_;

  size_t file_index_ = 0;  // paths_[file_index_ - 1] is open, 0: none yet
  std::FILE* file_ = nullptr;
  bool eof_ = false;
  int64_t line_number_ = 0;
  std::vector<char> buffer_;
  size_t begin_ = 0, end_ = 0;  // unread bytes of buffer_
  int64_t bytes_done_ = 0;      // bytes of the files closed so far
  int64_t file_bytes_ = 0;      // bytes of the current file consumed
  int64_t records_ = 0;
  int64_t skipped_lines_ = 0;
};

}  // namespace ember::train
