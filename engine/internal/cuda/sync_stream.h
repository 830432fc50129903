#pragma once

// SyncStream and RecordedEvent: what the GPU sync layer knows of a stream
// and of an event recorded on it.
//
// Every stream gets an id and counts the events recorded on it; an event
// carries (stream id, sequence number). Because work on one stream runs in
// order, waiting on event n of stream S also covers every earlier event of
// S. So a stream that already waited on S's event n skips later waits on
// S's events m <= n (CUDASTF keeps the same "last id per stream pair"), and
// a stream never waits on its own events.
//
// Thread safety: a SyncStream is used by the one worker that owns its
// stream (NextSequence and the wait bookkeeping are not synchronized).
// RecordedEvent is immutable.

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include <absl/container/flat_hash_map.h>
#include <cuda_runtime_api.h>

namespace ember::engine::internal {

struct RecordedEvent {
  cudaEvent_t event = nullptr;
  uint32_t stream_id = 0;
  uint64_t sequence = 0;
};

// Shared ownership of a recorded event: the event goes back to its pool only
// when the last reference is dropped, so nobody can still wait on it then.
using EventRef = std::shared_ptr<const RecordedEvent>;

class SyncStream {
 public:
  SyncStream(cudaStream_t stream, uint32_t id) : stream_(stream), id_(id) {}
  SyncStream(const SyncStream&) = delete;
  SyncStream& operator=(const SyncStream&) = delete;

  [[nodiscard]] cudaStream_t get() const { return stream_; }
  [[nodiscard]] uint32_t id() const { return id_; }
  uint64_t NextSequence() { return ++last_sequence_; }

  // Makes this stream wait (cudaStreamWaitEvent, no host block) for every
  // event in `events` it does not already follow. `op` names the op in
  // error messages. Returns the number of waits issued.
  int WaitFor(const std::vector<EventRef>& events, std::string_view op);

 private:
  const cudaStream_t stream_;
  const uint32_t id_;
  uint64_t last_sequence_ = 0;
  // Per source stream id: the newest sequence number this stream waited on.
  absl::flat_hash_map<uint32_t, uint64_t> waited_;
};

// Blocks the calling thread until every event in `events` has completed
// (cudaEventSynchronize): what a CPU op reading GPU-written data needs.
void HostWaitFor(const std::vector<EventRef>& events, std::string_view op);

}  // namespace ember::engine::internal
