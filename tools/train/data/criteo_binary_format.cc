#include "tools/train/data/criteo_binary_format.h"

#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <absl/strings/escaping.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include "engine/error.h"

namespace ember::train {

// The format is little-endian and the code copies its fields as they lie in
// memory; a big-endian port would byte-swap here.
static_assert(std::endian::native == std::endian::little, "the binary format is little-endian");

namespace {

constexpr size_t kWriteBufferBytes = size_t{4} << 20;
// No real model has more tables; a header claiming more is corrupt.
constexpr uint32_t kMaxTables = 1u << 16;
constexpr uint32_t kMaxDense = 1u << 16;

template <typename T>
T Load(std::span<const std::byte> bytes, size_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

template <typename T>
void Store(std::vector<std::byte>& bytes, size_t offset, T value) {
  std::memcpy(bytes.data() + offset, &value, sizeof(T));
}

int64_t HeaderBytes(int64_t num_tables) {
  const int64_t raw = kCriteoBinaryFixedHeader + 8 * num_tables;
  return (raw + 63) / 64 * 64;
}

[[noreturn]] void BadFile(const std::string& path, const std::string& what) {
  throw InvalidArgument(absl::StrCat("[CriteoBinaryHeader] ", path, ": ", what));
}

}  // namespace

int64_t CriteoBinaryHeader::header_bytes() const { return HeaderBytes(num_tables()); }

int64_t CriteoBinaryHeader::record_bytes() const {
  return 4 * (1 + int64_t{num_dense} + num_tables());
}

int64_t CriteoBinaryHeader::file_bytes() const {
  return header_bytes() + num_examples * record_bytes();
}

std::vector<std::byte> EncodeCriteoBinaryHeader(const CriteoBinaryHeader& header) {
  std::vector<std::byte> bytes(static_cast<size_t>(header.header_bytes()), std::byte{0});
  std::memcpy(bytes.data(), kCriteoBinaryMagic, sizeof(kCriteoBinaryMagic));
  Store<uint32_t>(bytes, 8, header.version);
  Store<uint32_t>(bytes, 12, static_cast<uint32_t>(header.header_bytes()));
  Store<uint32_t>(bytes, 16, static_cast<uint32_t>(header.num_dense));
  Store<uint32_t>(bytes, 20, static_cast<uint32_t>(header.num_tables()));
  Store<uint32_t>(bytes, 24, static_cast<uint32_t>(header.record_bytes()));
  Store<uint64_t>(bytes, 32, static_cast<uint64_t>(header.num_examples));
  Store<uint64_t>(bytes, 40, static_cast<uint64_t>(header.skipped_lines));
  for (int t = 0; t < header.num_tables(); ++t) {
    Store<uint64_t>(bytes, kCriteoBinaryFixedHeader + std::size_t{8} * t,
                    static_cast<uint64_t>(header.rows[t]));
  }
  return bytes;
}

CriteoBinaryHeader DecodeCriteoBinaryHeader(const std::string& path,
                                            std::span<const std::byte> bytes, int64_t file_bytes) {
  if (file_bytes < kCriteoBinaryFixedHeader) {
    BadFile(path,
            absl::StrCat("is ", file_bytes, " bytes, shorter than the ", kCriteoBinaryFixedHeader,
                         "-byte header: truncated, or not an Ember Criteo binary file"));
  }
  if (std::memcmp(bytes.data(), kCriteoBinaryMagic, sizeof(kCriteoBinaryMagic)) != 0) {
    const std::string_view magic(reinterpret_cast<const char*>(bytes.data()), 8);
    BadFile(path, absl::StrCat("bad magic '", absl::CHexEscape(std::string(magic)),
                               "' (expected 'EMBERCRT'): ", "not an Ember Criteo binary file"));
  }
  CriteoBinaryHeader header;
  header.version = Load<uint32_t>(bytes, 8);
  if (header.version != kCriteoBinaryVersion) {
    BadFile(path, absl::StrCat("format version ", header.version, "; this reader reads version ",
                               kCriteoBinaryVersion));
  }
  const auto header_bytes = Load<uint32_t>(bytes, 12);
  const auto num_dense = Load<uint32_t>(bytes, 16);
  const auto num_tables = Load<uint32_t>(bytes, 20);
  const auto record_bytes = Load<uint32_t>(bytes, 24);
  if (num_dense > kMaxDense || num_tables > kMaxTables) {
    BadFile(path, absl::StrCat("the header claims ", num_dense, " dense features and ", num_tables,
                               " tables: corrupt"));
  }
  header.num_dense = static_cast<int>(num_dense);
  if (header_bytes != HeaderBytes(num_tables)) {
    BadFile(path, absl::StrCat("header_bytes is ", header_bytes, "; ", num_tables,
                               " tables make it ", HeaderBytes(num_tables), ": corrupt"));
  }
  if (record_bytes != 4 * (1 + num_dense + num_tables)) {
    BadFile(path, absl::StrCat("record_bytes is ", record_bytes, "; ", num_dense, " dense and ",
                               num_tables, " tables make it ", 4 * (1 + num_dense + num_tables),
                               ": corrupt"));
  }
  if (file_bytes < header_bytes) {
    BadFile(path, absl::StrCat("is ", file_bytes, " bytes, shorter than its ", header_bytes,
                               "-byte header: truncated"));
  }
  for (uint32_t t = 0; t < num_tables; ++t) {
    header.rows.push_back(
        static_cast<int64_t>(Load<uint64_t>(bytes, kCriteoBinaryFixedHeader + std::size_t{8} * t)));
  }
  const auto num_examples = Load<uint64_t>(bytes, 32);
  header.skipped_lines = static_cast<int64_t>(Load<uint64_t>(bytes, 40));
  // Compare in records, so that a corrupt count cannot overflow the size.
  const uint64_t body = static_cast<uint64_t>(file_bytes) - header_bytes;
  const bool fits = num_examples <= body / record_bytes;
  if (!fits || body != num_examples * record_bytes) {
    const bool representable =
        num_examples <=
        (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - header_bytes) / record_bytes;
    const std::string expected =
        representable ? absl::StrCat(header_bytes + num_examples * record_bytes, " bytes")
                      : std::string("more than 2^63 bytes");
    BadFile(path, absl::StrCat("is ", file_bytes, " bytes; its header promises ", expected, " (",
                               header_bytes, " + ", num_examples, " examples x ", record_bytes,
                               "): ", fits ? "trailing bytes" : "truncated"));
  }
  header.num_examples = static_cast<int64_t>(num_examples);
  return header;
}

void CheckCriteoBinaryHeader(const std::string& path, const CriteoBinaryHeader& header,
                             const DataSpec& spec) {
  std::vector<std::string> diffs;
  if (header.num_dense != spec.num_dense) {
    diffs.push_back(absl::StrCat("the file has ", header.num_dense, " dense features, the model ",
                                 spec.num_dense));
  }
  if (header.num_tables() != spec.num_tables()) {
    diffs.push_back(absl::StrCat("the file has ", header.num_tables(), " tables, the model ",
                                 spec.num_tables()));
  } else {
    for (int t = 0; t < spec.num_tables(); ++t) {
      if (header.rows[t] != spec.rows[t]) {
        diffs.push_back(absl::StrCat("table ", t, " was hashed into ", header.rows[t],
                                     " rows, the model's has ", spec.rows[t]));
      }
    }
  }
  if (!diffs.empty()) {
    BadFile(path, absl::StrCat("does not match the model's tables: ", absl::StrJoin(diffs, "; ")));
  }
}

CriteoBinaryWriter::CriteoBinaryWriter(std::string path, std::vector<int64_t> rows)
    : path_(std::move(path)), tmp_path_(path_ + ".tmp") {
  if (rows.size() != kCriteoNumSparse) {
    throw InvalidArgument(absl::StrCat("[CriteoBinaryWriter] ", rows.size(),
                                       " tables; Criteo's layout has ", kCriteoNumSparse));
  }
  for (size_t t = 0; t < rows.size(); ++t) {
    if (rows[t] < 1) {
      throw InvalidArgument(
          absl::StrCat("[CriteoBinaryWriter] rows[", t, "] = ", rows[t], " is not positive"));
    }
  }
  header_.rows = std::move(rows);
  file_ = std::fopen(tmp_path_.c_str(), "wb");
  if (file_ == nullptr) {
    throw InvalidArgument(absl::StrCat("[CriteoBinaryWriter] cannot create '", tmp_path_,
                                       "': ", std::strerror(errno)));
  }
  buffer_.resize(kWriteBufferBytes);
  // Room for the header, written for real at Finish.
  const std::vector<std::byte> placeholder(static_cast<size_t>(header_.header_bytes()),
                                           std::byte{0});
  Write(placeholder.data(), placeholder.size());
}

CriteoBinaryWriter::~CriteoBinaryWriter() {
  if (file_ != nullptr) {
    std::fclose(file_);
    std::remove(tmp_path_.c_str());
  }
}

void CriteoBinaryWriter::Write(const void* data, size_t bytes) {
  if (used_ + bytes > buffer_.size()) Flush();
  std::memcpy(buffer_.data() + used_, data, bytes);
  used_ += bytes;
}

void CriteoBinaryWriter::Flush() {
  if (used_ > 0 && std::fwrite(buffer_.data(), 1, used_, file_) != used_) {
    throw Error(absl::StrCat("[CriteoBinaryWriter] cannot write '", tmp_path_,
                             "': ", std::strerror(errno)));
  }
  used_ = 0;
}

void CriteoBinaryWriter::Append(const CriteoRecord& record) {
  Write(&record, sizeof(record));
  ++header_.num_examples;
}

void CriteoBinaryWriter::Finish(int64_t skipped_lines) {
  header_.skipped_lines = skipped_lines;
  Flush();
  const std::vector<std::byte> header = EncodeCriteoBinaryHeader(header_);
  const auto fail = [&](const char* what) {
    throw Error(absl::StrCat("[CriteoBinaryWriter] cannot ", what, " '", tmp_path_,
                             "': ", std::strerror(errno)));
  };
  if (std::fseek(file_, 0, SEEK_SET) != 0) fail("seek in");
  if (std::fwrite(header.data(), 1, header.size(), file_) != header.size()) fail("write");
  // Durable before it gets its name: a crash after the rename must not leave
  // a converted file whose blocks never reached the disk.
  if (std::fflush(file_) != 0 || ::fsync(::fileno(file_)) != 0) fail("sync");
  std::FILE* file = std::exchange(file_, nullptr);
  if (std::fclose(file) != 0) {
    std::remove(tmp_path_.c_str());
    fail("close");
  }
  if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp_path_.c_str());
    throw Error(absl::StrCat("[CriteoBinaryWriter] cannot rename '", tmp_path_, "' to '", path_,
                             "': ", std::strerror(err)));
  }
}

}  // namespace ember::train
