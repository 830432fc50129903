#pragma once

// Profiler: a Chrome-trace (Perfetto-readable) record of every op, written
// when the engine is destroyed (EngineOptions::profile_path, ENGINE_PROFILE).
//
// Rows: one per thread (named after its worker pool, e.g. "ember-gpu0") with
// each op's host span, from the moment it runs to its on_complete, and the
// host waits inside it; one per CUDA stream ("gpu0 stream 3") with each GPU
// op's device span, timed by CUDA events around its launch, not by launch
// time. Times are microseconds since the profiler started.
//
// Thread safety: thread-safe. Spans are appended under one lock; profiling
// is for understanding a run, not for production speed.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/base/mutex.h"

namespace ember::engine::internal {

class Profiler {
 public:
  explicit Profiler(std::string path);
  ~Profiler();  // writes the trace; errors are logged
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // Nanoseconds on the profiler's clock (steady, from its start).
  [[nodiscard]] int64_t NowNs() const;

  // The calling thread's row (named after the thread on first use).
  uint64_t CurrentThreadRow();
  // A span on a thread's row.
  void ThreadSpan(uint64_t row, std::string_view name, std::string_view category, int64_t begin_ns,
                  int64_t end_ns);
  // A span on a GPU stream's row.
  void StreamSpan(std::string_view name, int device, uint32_t stream_id, int64_t begin_ns,
                  int64_t end_ns);

 private:
  struct Span {
    std::string name;
    std::string category;
    int64_t begin_ns;
    int64_t end_ns;
    uint64_t row;  // thread id, or a stream's row id
  };
  void Write();

  const std::string path_;
  const int64_t start_ns_;
  Mutex mu_;
  std::vector<Span> spans_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<uint64_t, std::string>> rows_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ember::engine::internal
