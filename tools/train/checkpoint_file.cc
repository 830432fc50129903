#include "tools/train/checkpoint_file.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <sstream>

#include <absl/strings/str_join.h>
#include <fmt/format.h>

#include "engine/error.h"

namespace ember::train {
namespace {

constexpr char kMagic[8] = {'E', 'M', 'B', 'R', 'C', 'K', 'P', 'T'};
constexpr char kEndMagic[8] = {'E', 'M', 'B', 'R', '-', 'E', 'N', 'D'};
constexpr uint32_t kVersion = 1;
constexpr std::size_t kChunk = std::size_t{1} << 20;
// Bounds that keep a damaged length field from allocating the machine.
constexpr uint64_t kMaxHeaderBytes = uint64_t{1} << 24;
constexpr uint32_t kMaxNameBytes = 4096;
constexpr uint32_t kMaxRank = 8;

// A fast 64-bit checksum over a byte stream fed in arbitrary pieces: eight
// bytes a step (a multiply-rotate mix), then the tail and the length. It
// detects truncation and damage; it is not a cryptographic hash.
class Checksum {
 public:
  void Update(const void* data, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    total_ += n;
    if (pending_ > 0) {
      while (n > 0 && pending_ < 8) {
        buffer_[pending_++] = *p++;
        --n;
      }
      if (pending_ < 8) return;
      Mix(Load(buffer_));
      pending_ = 0;
    }
    for (; n >= 8; p += 8, n -= 8) Mix(Load(p));
    while (n > 0) {
      buffer_[pending_++] = *p++;
      --n;
    }
  }
  [[nodiscard]] uint64_t Value() const {
    Checksum copy = *this;
    unsigned char tail[8] = {};
    std::memcpy(tail, buffer_, pending_);
    copy.Mix(Load(tail) ^ (uint64_t{pending_} << 56));
    copy.Mix(total_);
    uint64_t x = copy.h_;  // SplitMix64's finalizer
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  }

 private:
  static uint64_t Load(const unsigned char* p) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    return w;
  }
  void Mix(uint64_t w) {
    h_ = std::rotl(h_ ^ (w * 0x9e3779b97f4a7c15ull), 29) * 0xff51afd7ed558ccdull;
  }

  uint64_t h_ = 0x243f6a8885a308d3ull;
  uint64_t total_ = 0;
  unsigned char buffer_[8] = {};
  std::size_t pending_ = 0;
};

[[noreturn]] void WriteError(const std::string& what, const std::string& path) {
  throw Error(fmt::format("[WriteCheckpointFile] {} '{}': {}", what, path, std::strerror(errno)));
}

// Writes through a buffer to a file descriptor, checksumming every byte.
class Writer {
 public:
  Writer(int fd, std::string path) : fd_(fd), path_(std::move(path)) { buffer_.reserve(kChunk); }
  void Bytes(const void* data, std::size_t n) {
    checksum_.Update(data, n);
    const auto* p = static_cast<const char*>(data);
    if (buffer_.size() + n > kChunk) Flush();
    if (n >= kChunk) {
      WriteAll(p, n);
    } else {
      buffer_.insert(buffer_.end(), p, p + n);
    }
  }
  template <typename T>
  void Value(T value) {
    Bytes(&value, sizeof(value));
  }
  void Flush() {
    WriteAll(buffer_.data(), buffer_.size());
    buffer_.clear();
  }
  [[nodiscard]] uint64_t checksum() const { return checksum_.Value(); }

 private:
  void WriteAll(const char* p, std::size_t n) {
    while (n > 0) {
      const ssize_t written = ::write(fd_, p, n);
      if (written < 0) {
        if (errno == EINTR) continue;
        WriteError("cannot write", path_);
      }
      p += written;
      n -= static_cast<std::size_t>(written);
    }
  }

  const int fd_;
  const std::string path_;
  std::vector<char> buffer_;
  Checksum checksum_;
};

std::string Join(const std::vector<int64_t>& values) { return absl::StrJoin(values, " "); }

std::string HeaderText(const CheckpointHeader& h) {
  const ModelConfig& m = h.model;
  const OptimizerConfig& o = m.optimizer;
  std::ostringstream out;
  out.precision(9);
  out << "num_dense " << m.num_dense << "\n"
      << "bottom_mlp " << Join(m.bottom_mlp) << "\n"
      << "table_rows " << Join(m.table_rows) << "\n"
      << "embedding_dim " << m.embedding_dim << "\n"
      << "top_mlp " << Join(m.top_mlp) << "\n"
      << "pooling " << (m.pooling == ops::Pooling::kSum ? "sum" : "mean") << "\n"
      << "embedding_dtype " << storage::ToString(m.embedding_dtype) << "\n"
      << "optimizer " << ToString(o.kind) << "\n"
      << "dense_lr " << o.dense_lr << "\n"
      << "embedding_lr " << o.embedding_lr << "\n"
      << "eps " << o.eps << "\n"
      << "beta1 " << o.beta1 << "\n"
      << "beta2 " << o.beta2 << "\n"
      << "seed " << m.seed << "\n"
      << "step " << h.step << "\n"
      << "position " << h.position << "\n";
  return out.str();
}

// The non-empty pieces of `text` between `separator`s.
std::vector<std::string_view> Split(std::string_view text, char separator) {
  std::vector<std::string_view> pieces;
  while (!text.empty()) {
    const std::size_t at = text.find(separator);
    const std::string_view piece = text.substr(0, at);
    if (!piece.empty()) pieces.push_back(piece);
    if (at == std::string_view::npos) break;
    text.remove_prefix(at + 1);
  }
  return pieces;
}

class Parser {
 public:
  explicit Parser(std::string path) : path_(std::move(path)) {}
  [[noreturn]] void Fail(const std::string& what) const {
    throw InvalidArgument(fmt::format("[CheckpointFile] {}: {}", path_, what));
  }
  template <typename T>
  T Number(std::string_view key, std::string_view text) const {
    T value{};
    const char* end = text.data() + text.size();
    std::from_chars_result r{};
    if constexpr (std::is_floating_point_v<T>) {
      r = std::from_chars(text.data(), end, value, std::chars_format::general);
    } else {
      r = std::from_chars(text.data(), end, value);
    }
    if (text.empty() || r.ec != std::errc() || r.ptr != end) {
      Fail(fmt::format("header field '{}' has a bad value '{}'", key, text));
    }
    return value;
  }
  std::vector<int64_t> Numbers(std::string_view key, std::string_view text) const {
    std::vector<int64_t> values;
    for (std::string_view part : Split(text, ' ')) values.push_back(Number<int64_t>(key, part));
    return values;
  }

  CheckpointHeader Header(const std::string& text) const {
    CheckpointHeader h;
    ModelConfig& m = h.model;
    for (std::string_view line : Split(text, '\n')) {
      const std::size_t space = line.find(' ');
      const std::string_view key = line.substr(0, space);
      const std::string_view value = space == std::string_view::npos ? "" : line.substr(space + 1);
      if (key == "num_dense")
        m.num_dense = Number<int64_t>(key, value);
      else if (key == "bottom_mlp")
        m.bottom_mlp = Numbers(key, value);
      else if (key == "table_rows")
        m.table_rows = Numbers(key, value);
      else if (key == "embedding_dim")
        m.embedding_dim = Number<int64_t>(key, value);
      else if (key == "top_mlp")
        m.top_mlp = Numbers(key, value);
      else if (key == "pooling")
        m.pooling = value == "mean" ? ops::Pooling::kMean : ops::Pooling::kSum;
      else if (key == "embedding_dtype")
        m.embedding_dtype = DTypeNamed(value);
      else if (key == "optimizer")
        m.optimizer.kind = ParseOptimizer(value);
      else if (key == "dense_lr")
        m.optimizer.dense_lr = Number<float>(key, value);
      else if (key == "embedding_lr")
        m.optimizer.embedding_lr = Number<float>(key, value);
      else if (key == "eps")
        m.optimizer.eps = Number<float>(key, value);
      else if (key == "beta1")
        m.optimizer.beta1 = Number<float>(key, value);
      else if (key == "beta2")
        m.optimizer.beta2 = Number<float>(key, value);
      else if (key == "seed")
        m.seed = Number<uint64_t>(key, value);
      else if (key == "step")
        h.step = Number<int64_t>(key, value);
      else if (key == "position")
        h.position = Number<int64_t>(key, value);
      // Unknown keys are skipped: a later version may add fields.
    }
    return h;
  }

  storage::DType DTypeNamed(std::string_view name) const {
    for (storage::DType d : {storage::DType::kF32, storage::DType::kF16, storage::DType::kBF16,
                             storage::DType::kI32, storage::DType::kI64}) {
      if (storage::ToString(d) == name) return d;
    }
    Fail(fmt::format("unknown dtype '{}'", name));
  }

 private:
  const std::string path_;
};

// Reads a file front to back, checksumming every byte, failing on a short read.
class Reader {
 public:
  Reader(std::FILE* file, const Parser& parser) : file_(file), parser_(parser) {}
  void Bytes(void* dst, std::size_t n) {
    if (std::fread(dst, 1, n, file_) != n)
      parser_.Fail(fmt::format("truncated at byte {}", offset_));
    checksum_.Update(dst, n);
    offset_ += n;
  }
  template <typename T>
  T Value() {
    T value;
    Bytes(&value, sizeof(value));
    return value;
  }
  void Skip(uint64_t n) {
    std::vector<char> chunk(std::min<uint64_t>(n, kChunk));
    while (n > 0) {
      const std::size_t part = static_cast<std::size_t>(std::min<uint64_t>(n, chunk.size()));
      Bytes(chunk.data(), part);
      n -= part;
    }
  }
  [[nodiscard]] uint64_t offset() const { return offset_; }
  [[nodiscard]] uint64_t checksum() const { return checksum_.Value(); }

 private:
  std::FILE* const file_;
  const Parser& parser_;
  Checksum checksum_;
  uint64_t offset_ = 0;
};

// Removes the temporary files that writers killed mid-write left beside
// `target` (".NAME.tmp-PID" of a process that no longer runs), so that
// repeated preemptions do not fill the disk with checkpoint-sized files. A
// live writer's file, another run's in the same directory, is left alone.
void RemoveStaleTemps(const std::filesystem::path& dir, const std::filesystem::path& target) {
  const std::string prefix = fmt::format(".{}.tmp-", target.filename().string());
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string_view digits = std::string_view(name).substr(prefix.size());
    pid_t pid = 0;
    const auto [end, parsed] = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
    if (parsed != std::errc() || end != digits.data() + digits.size() || pid <= 0) continue;
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    std::filesystem::remove(entry.path(), ec);
  }
}

}  // namespace

void WriteCheckpointFile(const std::string& path, const CheckpointHeader& header,
                         const std::vector<SectionOut>& sections) {
  const std::filesystem::path target(path);
  const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : ".";
  RemoveStaleTemps(dir, target);
  const std::string temp =
      (dir / fmt::format(".{}.tmp-{}", target.filename().string(), ::getpid())).string();
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) WriteError("cannot create", temp);
  try {
    Writer out(fd, temp);
    const std::string text = HeaderText(header);
    out.Bytes(kMagic, sizeof(kMagic));
    out.Value<uint32_t>(kVersion);
    out.Value<uint64_t>(text.size());
    out.Bytes(text.data(), text.size());
    out.Value<uint64_t>(sections.size());
    for (const SectionOut& s : sections) {
      int64_t numel = 1;
      for (int64_t d : s.shape) numel *= d;
      const uint64_t bytes = static_cast<uint64_t>(numel) * storage::SizeOf(s.dtype);
      out.Value<uint32_t>(static_cast<uint32_t>(s.name.size()));
      out.Bytes(s.name.data(), s.name.size());
      out.Value<uint8_t>(static_cast<uint8_t>(s.dtype));
      out.Value<uint32_t>(static_cast<uint32_t>(s.shape.size()));
      for (int64_t d : s.shape) out.Value<int64_t>(d);
      out.Value<uint64_t>(bytes);
      out.Bytes(s.data, bytes);
    }
    out.Bytes(kEndMagic, sizeof(kEndMagic));
    const uint64_t checksum = out.checksum();
    out.Value<uint64_t>(checksum);
    out.Flush();
    // Durable before it becomes visible: a crash after the rename must not
    // leave the name pointing at blocks that never reached the disk.
    if (::fsync(fd) != 0) WriteError("cannot fsync", temp);
  } catch (...) {
    ::close(fd);
    ::unlink(temp.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    ::unlink(temp.c_str());
    WriteError("cannot close", temp);
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int saved = errno;
    ::unlink(temp.c_str());
    errno = saved;
    WriteError(fmt::format("cannot rename '{}' to", temp), path);
  }
  // The rename itself is durable once the directory is synced.
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

CheckpointFile CheckpointFile::Open(const std::string& path) {
  const Parser parser(path);
  std::FILE* raw = std::fopen(path.c_str(), "rb");
  if (raw == nullptr) parser.Fail(fmt::format("cannot open: {}", std::strerror(errno)));
  CheckpointFile file;
  file.path_ = path;
  file.file_ = std::shared_ptr<std::FILE>(raw, [](std::FILE* f) { std::fclose(f); });
  Reader in(raw, parser);
  char magic[8];
  in.Bytes(magic, sizeof(magic));
  if (std::memcmp(magic, kMagic, sizeof(magic)) != 0) parser.Fail("not an Ember checkpoint");
  const auto version = in.Value<uint32_t>();
  if (version != kVersion) {
    parser.Fail(fmt::format("format version {}; this build reads {}", version, kVersion));
  }
  const auto header_bytes = in.Value<uint64_t>();
  if (header_bytes > kMaxHeaderBytes) parser.Fail("damaged header length");
  std::string text(header_bytes, '\0');
  in.Bytes(text.data(), text.size());
  const auto count = in.Value<uint64_t>();
  for (uint64_t i = 0; i < count; ++i) {
    Section s;
    const auto name_bytes = in.Value<uint32_t>();
    if (name_bytes > kMaxNameBytes) parser.Fail(fmt::format("damaged section {}", i));
    s.name.resize(name_bytes);
    in.Bytes(s.name.data(), name_bytes);
    s.dtype = static_cast<storage::DType>(in.Value<uint8_t>());
    const auto rank = in.Value<uint32_t>();
    if (rank > kMaxRank) parser.Fail(fmt::format("damaged section '{}'", s.name));
    for (uint32_t d = 0; d < rank; ++d) s.shape.push_back(in.Value<int64_t>());
    s.bytes = in.Value<uint64_t>();
    s.offset = in.offset();
    in.Skip(s.bytes);
    file.sections_.push_back(std::move(s));
  }
  char end[8];
  in.Bytes(end, sizeof(end));
  if (std::memcmp(end, kEndMagic, sizeof(end)) != 0) parser.Fail("damaged: no end marker");
  const uint64_t expected = in.checksum();
  const auto stored = in.Value<uint64_t>();
  if (stored != expected) parser.Fail("damaged: checksum mismatch");
  if (std::fgetc(raw) != EOF) parser.Fail("damaged: bytes after the end");
  file.header_ = parser.Header(text);
  return file;
}

const CheckpointFile::Section* CheckpointFile::Find(const std::string& name) const {
  for (const Section& s : sections_) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

void CheckpointFile::Read(const Section& section, void* dst) const {
  std::FILE* f = file_.get();
  if (::fseeko(f, static_cast<off_t>(section.offset), SEEK_SET) != 0 ||
      std::fread(dst, 1, section.bytes, f) != section.bytes) {
    throw InvalidArgument(
        fmt::format("[CheckpointFile] {}: cannot read section '{}'", path_, section.name));
  }
}

}  // namespace ember::train
