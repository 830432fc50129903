#include "tools/train/data/criteo_binary_source.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include <absl/strings/str_cat.h>

#include "engine/error.h"
#include "tools/train/data/batch_builder.h"
#include "tools/train/data/criteo_binary_format.h"
#include "tools/train/data/record_batch.h"

namespace ember::train {

// One mapped file: the map lives as long as the source.
struct CriteoBinarySource::File {
  std::string path;
  const std::byte* data = nullptr;
  size_t bytes = 0;
  CriteoBinaryHeader header;

  ~File() {
    if (data != nullptr) ::munmap(const_cast<std::byte*>(data), bytes);
  }
  [[nodiscard]] const std::byte* record(int64_t i) const {
    return data + header.header_bytes() + i * header.record_bytes();
  }
};

namespace {

[[noreturn]] void Fail(const std::string& what) {
  throw InvalidArgument(absl::StrCat("[CriteoBinarySource] ", what));
}

// "FILE: record R: ...: corrupt", for record `record` of `path`.
std::string Describe(const std::string& path, int64_t record, const RecordFault& fault,
                     const DataSpec& spec) {
  const std::string at = absl::StrCat(path, ": record ", record, ": ");
  switch (fault.field) {
    case RecordFault::Field::kLabel:
      return absl::StrCat(at, "label ", fault.value, " is not 0 or 1: corrupt");
    case RecordFault::Field::kDense:
      return absl::StrCat(at, "dense feature ", fault.index, ": ", fault.value,
                          " is not a transformed count (log(1 + x), finite and not negative): "
                          "corrupt");
    case RecordFault::Field::kRow:
      break;
  }
  return absl::StrCat(at, "table ", fault.index, ": row ", fault.row, " is not below the table's ",
                      spec.rows[fault.index], " rows: corrupt");
}

}  // namespace

CriteoBinarySource::CriteoBinarySource(const CriteoBinaryOptions& options)
    : BatchSource(options.batch_size), spec_(options.spec) {
  if (options.paths.empty()) Fail("no input files given");
  for (const std::string& path : options.paths) {
    auto file = std::make_unique<File>();
    file->path = path;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) Fail(absl::StrCat("cannot open '", path, "': ", std::strerror(errno)));
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      ::close(fd);
      Fail(absl::StrCat("cannot stat '", path, "': ", std::strerror(err)));
    }
    file->bytes = static_cast<size_t>(st.st_size);
    if (file->bytes > 0) {
      void* map = ::mmap(nullptr, file->bytes, PROT_READ, MAP_PRIVATE, fd, 0);
      const int err = errno;
      ::close(fd);
      if (map == MAP_FAILED) Fail(absl::StrCat("cannot map '", path, "': ", std::strerror(err)));
      file->data = static_cast<const std::byte*>(map);
      // Read front to back: the kernel may read ahead aggressively.
      (void)::madvise(map, file->bytes, MADV_SEQUENTIAL);
    } else {
      ::close(fd);
    }
    file->header =
        DecodeCriteoBinaryHeader(path, std::span<const std::byte>(file->data, file->bytes),
                                 static_cast<int64_t>(file->bytes));
    CheckCriteoBinaryHeader(path, file->header, spec_);
    starts_.push_back(total_);
    total_ += file->header.num_examples;
    files_.push_back(std::move(file));
  }
}

CriteoBinarySource::~CriteoBinarySource() = default;

std::optional<HostBatch> CriteoBinarySource::Next(const BatchMemory& memory) {
  const int64_t count = std::min(batch_size(), total_ - position_);
  if (count <= 0) return std::nullopt;
  BatchBuilder builder(memory, count, spec_.num_dense, spec_.num_tables());
  StartRecordBatch(builder);
  // The file holding position_: the last one starting at or before it
  // (empty files start where the next one does, and are passed over).
  auto f = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), position_) -
                               starts_.begin() - 1);
  int64_t done = 0;
  while (done < count) {
    const File& file = *files_[f];
    const int64_t first = position_ + done - starts_[f];
    const int64_t n = std::min(count - done, file.header.num_examples - first);
    if (n <= 0) {
      ++f;
      continue;
    }
    const auto fault = CopyRecords(builder, done, file.record(first), n, spec_);
    if (fault) Fail(Describe(file.path, first + fault->record, *fault, spec_));
    done += n;
    ++f;
  }
  position_ += count;
  return std::move(builder).Finish(position_);
}

void CriteoBinarySource::Seek(int64_t example) {
  if (example < 0 || example > total_) {
    throw InvalidArgument(absl::StrCat("[CriteoBinarySource::Seek] example ", example,
                                       " is outside [0, ", total_, "]"));
  }
  position_ = example;
}

}  // namespace ember::train
