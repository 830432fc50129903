#pragma once

// EventPool: CUDA events of one device, handed out recorded and taken back
// only when the last EventRef to them is dropped.
//
// Why references and not a ring: MXNet's engine cycles through a shared ring
// of 64 events by a counter, so a busy engine re-records an event that an op
// is about to wait on, and the op then waits for the wrong work (or none).
// Here an event is reused only when no SyncObject and no waiter holds it;
// cudaStreamWaitEvent captures the event's state when it is called, so a
// waiter may drop its reference right after the call, and a host waiter
// keeps it until cudaEventSynchronize returns.
//
// Events are created without timing (cheaper to record). At most
// `max_cached` free events are kept; beyond that, returned events are
// destroyed, so the pool never limits how many events are live.
//
// Thread safety: thread-safe. The pool stays alive while any of its events
// does (each EventRef holds the pool).

#include <cstddef>
#include <memory>
#include <vector>

#include "engine/internal/cuda/sync_stream.h"
#include "engine/internal/mutex.h"

namespace ember::engine::internal {

class EventPool : public std::enable_shared_from_this<EventPool> {
 public:
  static std::shared_ptr<EventPool> Create(int device, std::size_t max_cached);
  ~EventPool();
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;

  // Records an event on `stream` (after the work launched on it so far) and
  // returns the only reference to it. REQUIRES: stream belongs to this
  // pool's device; called by the stream's owner.
  EventRef Record(SyncStream& stream);

  [[nodiscard]] std::size_t cached() const;   // free events kept for reuse
  [[nodiscard]] std::size_t created() const;  // events created so far

 private:
  EventPool(int device, std::size_t max_cached) : device_(device), max_cached_(max_cached) {}
  cudaEvent_t Take();
  void Return(cudaEvent_t event);

  const int device_;
  const std::size_t max_cached_;
  mutable Mutex mu_;
  std::vector<cudaEvent_t> free_ ABSL_GUARDED_BY(mu_);
  std::size_t created_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ember::engine::internal
