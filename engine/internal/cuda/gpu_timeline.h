#pragma once

// GpuTimeline: the GPU spans of profiled ops, timed with CUDA events and put
// on the profiler's clock through one reference event per device whose host
// time is known (recorded and synchronized when profiling starts). Spans
// whose end event has passed go to the profiler in batches; the rest when
// the timeline is destroyed.
//
// Thread safety: thread-safe (Add and Resolve lock).

#include <cstdint>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "engine/base/mutex.h"

namespace ember::engine::internal {

class Profiler;

class GpuTimeline {
 public:
  // One reference event per device; leaves the thread's current device as
  // it was. `profiler` must outlive the timeline.
  GpuTimeline(Profiler* profiler, int devices);
  ~GpuTimeline();  // resolves every span (waits for their events)
  GpuTimeline(const GpuTimeline&) = delete;
  GpuTimeline& operator=(const GpuTimeline&) = delete;

  // A timing event recorded on `stream` now (on its device, the current one).
  static cudaEvent_t Mark(cudaStream_t stream);

  // A span of op `name` on stream `stream_id` of `device`, between two
  // events made by Mark; the timeline owns (and destroys) them.
  void Add(std::string name, int device, uint32_t stream_id, cudaEvent_t begin, cudaEvent_t end);

 private:
  static constexpr std::size_t kResolveEvery = 1024;
  struct Ref {
    cudaEvent_t event;
    int64_t host_ns;
  };
  struct Pending {
    std::string name;
    int device;
    uint32_t stream;
    cudaEvent_t begin;
    cudaEvent_t end;
  };

  int64_t HostNs(int device, cudaEvent_t event) const;
  // Moves finished spans to the profiler; with `wait`, all of them.
  void ResolveLocked(bool wait) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Profiler* const profiler_;
  std::vector<Ref> refs_;  // by device; constant after construction
  Mutex mu_;
  std::vector<Pending> pending_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ember::engine::internal
