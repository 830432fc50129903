#include "engine/internal/profiler.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>

#include <fmt/format.h>

#include "engine/base/logging.h"

namespace ember::engine::internal {
namespace {

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Stream rows get ids far above any thread id.
uint64_t StreamRow(int device, uint32_t stream_id) {
  return (uint64_t{1} << 40) + (static_cast<uint64_t>(device) << 20) + stream_id;
}

std::string ThreadName() {
  char name[32] = {};
  pthread_getname_np(pthread_self(), name, sizeof(name));
  return name;
}

// JSON string escaping for op names (quotes, backslashes, control bytes).
std::string Escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", c);
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

Profiler::Profiler(std::string path) : path_(std::move(path)), start_ns_(SteadyNs()) {}

Profiler::~Profiler() { Write(); }

int64_t Profiler::NowNs() const { return SteadyNs() - start_ns_; }

uint64_t Profiler::CurrentThreadRow() {
  thread_local const uint64_t tid = static_cast<uint64_t>(syscall(SYS_gettid));
  MutexLock lock(&mu_);
  if (std::none_of(rows_.begin(), rows_.end(), [](const auto& row) { return row.first == tid; })) {
    rows_.emplace_back(tid, ThreadName());
  }
  return tid;
}

void Profiler::ThreadSpan(uint64_t row, std::string_view name, std::string_view category,
                          int64_t begin_ns, int64_t end_ns) {
  MutexLock lock(&mu_);
  spans_.push_back({std::string(name), std::string(category), begin_ns, end_ns, row});
}

void Profiler::StreamSpan(std::string_view name, int device, uint32_t stream_id, int64_t begin_ns,
                          int64_t end_ns) {
  const uint64_t row = StreamRow(device, stream_id);
  MutexLock lock(&mu_);
  if (std::none_of(rows_.begin(), rows_.end(), [&](const auto& r) { return r.first == row; })) {
    rows_.emplace_back(row, fmt::format("gpu{} stream {}", device, stream_id));
  }
  spans_.push_back({std::string(name), "gpu", begin_ns, end_ns, row});
}

void Profiler::Write() {
  MutexLock lock(&mu_);
  std::ofstream out(path_);
  if (!out) {
    Log().error("[Profiler] cannot write the profile to '{}'", path_);
    return;
  }
  const int pid = getpid();
  out << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  bool first = true;
  auto separator = [&] { return std::exchange(first, false) ? "" : ",\n"; };
  for (const auto& [row, name] : rows_) {
    out << separator()
        << fmt::format(
               R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":"{}"}}}})", pid,
               row, Escape(name));
  }
  for (const Span& span : spans_) {
    out << separator()
        << fmt::format(
               R"({{"ph":"X","name":"{}","cat":"{}","pid":{},"tid":{},"ts":{:.3f},"dur":{:.3f}}})",
               Escape(span.name), span.category, pid, span.row, span.begin_ns / 1e3,
               std::max<int64_t>(span.end_ns - span.begin_ns, 0) / 1e3);
  }
  out << "\n]}\n";
  Log().info("[Profiler] wrote {} spans to '{}'", spans_.size(), path_);
}

}  // namespace ember::engine::internal
