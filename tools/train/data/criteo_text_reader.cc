#include "tools/train/data/criteo_text_reader.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <absl/strings/str_cat.h>

#include "engine/base/logging.h"
#include "engine/error.h"
#include "tools/train/data/criteo_line.h"

namespace ember::train {
namespace {

constexpr size_t kChunkBytes = size_t{4} << 20;
// A line longer than this is not a Criteo line (they run to ~300 bytes):
// refuse it rather than buffer a whole file that has no newlines.
constexpr size_t kMaxLineBytes = size_t{64} << 20;
// Skipped lines logged one by one; the rest are only counted.
constexpr int64_t kLoggedSkips = 10;

}  // namespace

CriteoTextReader::CriteoTextReader(std::vector<std::string> paths, std::vector<int64_t> rows,
                                   bool skip_bad_lines, std::string who)
    : paths_(std::move(paths)),
      rows_(std::move(rows)),
      skip_bad_lines_(skip_bad_lines),
      who_(std::move(who)) {
  if (paths_.empty()) Fail("no input files given");
  if (rows_.size() != kCriteoNumSparse) {
    Fail(absl::StrCat("the model has ", rows_.size(), " tables; Criteo's layout has ",
                      kCriteoNumSparse));
  }
  for (size_t t = 0; t < rows_.size(); ++t) {
    if (rows_[t] < 1) Fail(absl::StrCat("rows[", t, "] = ", rows_[t], " is not positive"));
  }
}

CriteoTextReader::~CriteoTextReader() { CloseFile(); }

void CriteoTextReader::Fail(const std::string& what) const {
  throw InvalidArgument(absl::StrCat("[", who_, "] ", what));
}

void CriteoTextReader::CloseFile() {
  if (file_ != nullptr) std::fclose(file_);
  file_ = nullptr;
}

bool CriteoTextReader::OpenNext() {
  if (file_ != nullptr) {
    CloseFile();
    bytes_done_ += file_bytes_;
  }
  file_bytes_ = 0;
  if (file_index_ == paths_.size()) return false;
  const std::string& path = paths_[file_index_++];
  file_ = std::fopen(path.c_str(), "rb");
  if (file_ == nullptr) Fail(absl::StrCat("cannot open '", path, "': ", std::strerror(errno)));
  eof_ = false;
  line_number_ = 0;
  begin_ = end_ = 0;
  if (buffer_.size() < kChunkBytes) buffer_.resize(kChunkBytes);
  return true;
}

void CriteoTextReader::Rewind() {
  CloseFile();
  file_index_ = 0;
  bytes_done_ = file_bytes_ = 0;
  records_ = skipped_lines_ = 0;
  begin_ = end_ = 0;
}

bool CriteoTextReader::NextLine(std::string_view* line) {
  size_t scanned = begin_;  // bytes before this are known to hold no '\n'
  for (;;) {
    const void* nl = std::memchr(buffer_.data() + scanned, '\n', end_ - scanned);
    if (nl != nullptr || (eof_ && end_ > begin_)) {
      const char* start = buffer_.data() + begin_;
      const char* stop = nl != nullptr ? static_cast<const char*>(nl) : buffer_.data() + end_;
      const auto consumed = static_cast<size_t>(stop - start) + (nl != nullptr ? 1 : 0);
      size_t length = static_cast<size_t>(stop - start);
      if (length > 0 && start[length - 1] == '\r') --length;
      *line = std::string_view(start, length);
      begin_ += consumed;
      file_bytes_ += static_cast<int64_t>(consumed);
      ++line_number_;
      return true;
    }
    if (eof_) return false;
    // Keep the partial line, at the front, and read more behind it.
    const size_t partial = end_ - begin_;
    if (begin_ > 0) {
      std::memmove(buffer_.data(), buffer_.data() + begin_, partial);
      begin_ = 0;
      end_ = partial;
    }
    if (end_ == buffer_.size()) {
      if (buffer_.size() >= kMaxLineBytes) {
        Fail(absl::StrCat(paths_[file_index_ - 1], ":", line_number_ + 1, ": longer than ",
                          kMaxLineBytes, " bytes; not a Criteo line"));
      }
      buffer_.resize(buffer_.size() * 2);
    }
    scanned = end_;
    const size_t got = std::fread(buffer_.data() + end_, 1, buffer_.size() - end_, file_);
    end_ += got;
    if (got == 0) {
      if (std::ferror(file_) != 0) {
        Fail(absl::StrCat("cannot read '", paths_[file_index_ - 1], "': ", std::strerror(errno)));
      }
      eof_ = true;
    }
  }
}

bool CriteoTextReader::Next(CriteoRecord* record) {
  for (;;) {
    std::string_view line;
    if (file_ == nullptr || !NextLine(&line)) {
      if (!OpenNext()) return false;
      continue;
    }
    const auto error = ParseCriteoLine(line, rows_, record);
    if (!error) {
      ++records_;
      return true;
    }
    const std::string where = absl::StrCat(paths_[file_index_ - 1], ":", line_number_, ": ",
                                           DescribeCriteoLineError(*error));
    if (!skip_bad_lines_) Fail(where);
    ++skipped_lines_;
    if (skipped_lines_ <= kLoggedSkips) {
      Log().warn("[{}] skipping bad line {}{}", who_, where,
                 skipped_lines_ == kLoggedSkips ? " (further bad lines are only counted)" : "");
    }
  }
}

}  // namespace ember::train
