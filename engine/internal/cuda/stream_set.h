#pragma once

// StreamSet: the streams of one backend, by device. Per-thread mode
// (ThreadedEnginePerDevice): each worker thread makes its own stream per
// device on first use. Round-robin mode (ThreadedEngine): every device has
// a fixed set of streams, handed out to ops in turn whichever worker runs
// them. Streams live until Clear (each drains first).
//
// Priorities: in per-thread mode a thread's streams take the priority of
// the rank it started with (see StreamRank); with `ranked` false, or in
// round-robin mode (one pool runs every kind of op), all stay at the
// default, the lowest.
//
// Thread safety: thread-safe; For acts on the calling thread's streams.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "engine/base/mutex.h"
#include "engine/internal/cuda/sync_stream.h"

namespace ember::engine::internal {

class StreamSet {
 public:
  // `round_robin`: streams per device in round-robin mode, 0 for per-thread
  // mode. Leaves the thread's current device as it was. Throws CudaError.
  StreamSet(int devices, int round_robin, std::size_t max_events, bool ranked);

  // The stream the calling thread's next op on `device` uses. REQUIRES:
  // `device` is the thread's current device (a new stream is made there).
  SyncStream* For(int device);
  // For a worker thread as it starts: the streams it makes from now on run
  // at `rank`'s priority. No effect in round-robin mode.
  void SetThreadRank(StreamRank rank);

  // Calls `fn` on every stream made so far.
  void ForEach(const std::function<void(SyncStream&)>& fn);

  // Destroys the streams (each drains first).
  void Clear();

 private:
  // A stream at `rank`'s priority; with none (or `ranked_` false), at CUDA's
  // default.
  SyncStream* Make(std::optional<StreamRank> rank);

  static inline std::atomic<uint64_t> next_id_{0};
  const uint64_t id_;  // never reused: tells a thread's streams of this set from a dead one's
  const int devices_;
  const std::size_t max_events_;
  const bool ranked_;
  std::vector<std::vector<SyncStream*>> shared_;  // by device (round-robin mode)
  std::vector<std::atomic<uint32_t>> turns_;      // by device
  Mutex mu_;
  std::vector<std::unique_ptr<SyncStream>> all_ ABSL_GUARDED_BY(mu_);
  uint32_t next_stream_id_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ember::engine::internal
