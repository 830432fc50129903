#pragma once

// SyncStream: a CUDA stream, the events recorded on it, and how far the GPU
// is known to have got through them.
//
// Every event recorded on a stream gets the next sequence number of that
// stream. Work on one stream runs in order, so:
//  - waiting on event n of stream S also covers every earlier event of S: a
//    stream that already waited on S's event n skips later waits on S's
//    events m <= n (CUDASTF keeps the same "last id per stream pair"), and a
//    stream never waits on its own events;
//  - once event n is seen complete, every m <= n is complete too: the
//    stream's `completed` watermark, which lets waiters skip events the GPU
//    has passed and lets SyncObjects drop them.
//
// Events are pooled per stream, in recording order: an event is recorded
// again only after the GPU has passed it, and only on its own stream, so a
// waiter still holding its old (stream, sequence, event) waits at worst for
// later work of the same stream, never for less than it needs. No reference
// counting and no allocation per recorded event. At most `max_events` are
// ever created per stream; when all of them are in flight, Record waits on
// the host for the oldest (the stream is that many ops behind the host).
//
// Thread safety: thread-safe. A stream usually has one user (a worker's
// own stream), so its lock (a spin lock: held for a few bookkeeping steps
// and CUDA calls that never wait for the GPU) is uncontended; it is there
// for streams shared round-robin (ThreadedEngine) and for async ops that
// complete on another thread. The one host wait (for the oldest event, when
// all are in flight) happens outside it. Waits are issued under the lock
// before they are noted, so an op that skips a wait as already issued
// launches after it.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <string_view>
#include <vector>

#include <cuda_runtime_api.h>

#include "engine/base/spin_lock.h"
#include "engine/internal/gpu_fence.h"

namespace ember::engine::internal {

// An event recorded on a stream: what a SyncObject keeps and a waiter
// follows. Plain data, copied freely: the engine's GpuFence itself, whose
// event is a cudaEvent_t (CUevent_st*).
using StreamEvent = GpuFence;

class SyncStream {
 public:
  // Takes ownership of `stream`. REQUIRES: max_events >= 1.
  SyncStream(cudaStream_t stream, uint32_t id, std::size_t max_events);
  // Destroys the stream's events and the stream (after it drained).
  ~SyncStream();
  SyncStream(const SyncStream&) = delete;
  SyncStream& operator=(const SyncStream&) = delete;

  [[nodiscard]] cudaStream_t get() const { return stream_; }
  [[nodiscard]] uint32_t id() const { return id_; }

  // Records an event after the work launched on the stream so far. `op`
  // names the op in error messages.
  StreamEvent Record(std::string_view op);

  // True when the GPU is known to have finished `event`'s work.
  [[nodiscard]] bool Passed(const StreamEvent& event) const {
    return event.sequence <= completed_.load(std::memory_order_acquire);
  }

  // Asks the GPU (cudaEventQuery, never blocking) whether `event` has
  // passed, raising the watermark if so. A recycled event answers for a
  // later point of the same stream, so a "no" may be early, never a "yes".
  [[nodiscard]] bool QueryPassed(const StreamEvent& event) const;

  // Raises the completed watermark to `sequence`, which the caller saw
  // complete (a host wait on its event, or a reap).
  void NotePassed(uint64_t sequence) const;

  // Makes this stream wait (cudaStreamWaitEvent, no host block) for every
  // event in `events` it does not already follow: at most one wait per
  // source stream, on its newest event. Returns the number of waits issued.
  int WaitFor(std::span<const StreamEvent> events, std::string_view op);

  [[nodiscard]] std::size_t events_created() const;

 private:
  cudaEvent_t FreeEventLocked(std::string_view op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves the events the GPU has passed from in_flight_ to free_, without
  // blocking.
  void Reap(std::string_view op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const cudaStream_t stream_;
  const uint32_t id_;
  const std::size_t max_events_;
  mutable std::atomic<uint64_t> completed_{0};  // only grows
  mutable SpinLock mu_;
  uint64_t last_sequence_ ABSL_GUARDED_BY(mu_) = 0;
  struct InFlight {
    uint64_t sequence;
    cudaEvent_t event;
  };
  std::deque<InFlight> in_flight_ ABSL_GUARDED_BY(mu_);  // recording order
  std::vector<cudaEvent_t> free_ ABSL_GUARDED_BY(mu_);
  std::size_t created_ ABSL_GUARDED_BY(mu_) = 0;
  // By source stream id (small and dense, from the backend's counter): the
  // newest sequence number this stream waited on.
  std::vector<uint64_t> waited_ ABSL_GUARDED_BY(mu_);
};

// Blocks the calling thread until every event in `events` the GPU has not
// yet passed has completed (cudaEventSynchronize): what a CPU op reading
// GPU-written data needs.
void HostWaitFor(std::span<const StreamEvent> events, std::string_view op);

}  // namespace ember::engine::internal
