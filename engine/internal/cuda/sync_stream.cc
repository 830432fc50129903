#include "engine/internal/cuda/sync_stream.h"

#include <algorithm>

#include <absl/container/inlined_vector.h>

#include "engine/cuda/check.h"

namespace ember::engine::internal {
namespace {

// Whether the GPU has finished `event`'s work (cudaEventQuery).
bool EventDone(cudaEvent_t event, std::string_view op) {
  const cudaError_t status = cudaEventQuery(event);
  if (status == cudaErrorNotReady) {
    (void)cudaGetLastError();  // "not ready" is an answer, not an error to keep
    return false;
  }
  CudaCheckForOp(status, "cudaEventQuery", op);
  return true;
}

}  // namespace

SyncStream::SyncStream(cudaStream_t stream, uint32_t id, std::size_t max_events)
    : stream_(stream), id_(id), max_events_(max_events < 1 ? 1 : max_events) {}

// Nothing else uses the stream once it is destroyed, so the drain needs no
// lock (a spin lock is never held across a blocking call).
SyncStream::~SyncStream() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  CudaLogIfError(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (shutdown)");
  for (const InFlight& entry : in_flight_) free_.push_back(entry.event);
  for (cudaEvent_t event : free_) CudaLogIfError(cudaEventDestroy(event), "cudaEventDestroy");
  CudaLogIfError(cudaStreamDestroy(stream_), "cudaStreamDestroy");
}

// When every event is in flight and none has passed, the stream is
// max_events_ ops behind the host: the caller waits on the host for the
// oldest, outside the lock, and tries again.
StreamEvent SyncStream::Record(std::string_view op) {
  for (;;) {
    InFlight oldest{};
    {
      SpinLockHolder lock(&mu_);
      if (cudaEvent_t event = FreeEventLocked(op)) {
        const cudaError_t status = cudaEventRecord(event, stream_);
        if (status != cudaSuccess) {
          free_.push_back(event);
          CudaCheckForOp(status, "cudaEventRecord", op);
        }
        in_flight_.push_back({++last_sequence_, event});
        return StreamEvent{this, last_sequence_, event};
      }
      oldest = in_flight_.front();
    }
    // If another user of the stream recycles this event meanwhile, the wait
    // covers a later point of the stream: longer, never too short.
    CudaCheckForOp(cudaEventSynchronize(oldest.event), "cudaEventSynchronize", op);
    NotePassed(oldest.sequence);
  }
}

// A passed event to reuse, or a new one while under the cap, or null (the
// caller waits). Looks for passed events only once kReapBatch are in
// flight, so that one reap (a few cudaEventQuery calls, see Reap) frees a
// large batch: a query costs several times less than a launch when the
// event has completed, and about half a launch when it has not, so reaping
// every few ops would cost a visible part of each.
cudaEvent_t SyncStream::FreeEventLocked(std::string_view op) {
  constexpr std::size_t kReapBatch = 128;
  if (free_.empty() && in_flight_.size() >= std::min(kReapBatch, max_events_)) Reap(op);
  if (free_.empty() && created_ < max_events_) {
    cudaEvent_t event = nullptr;
    CudaCheckForOp(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                   "cudaEventCreateWithFlags", op);
    ++created_;
    return event;
  }
  if (free_.empty()) return nullptr;
  cudaEvent_t event = free_.back();
  free_.pop_back();
  return event;
}

// Stream order makes the passed events a prefix of in_flight_ (events
// below the completed watermark have passed already): the newest is asked
// first (an idle stream has passed everything), then the prefix's end is
// found by bisection, so a reap costs O(log n) queries for n events (asking
// each in turn cost one query per event, about one per op). Never blocks.
void SyncStream::Reap(std::string_view op) {
  if (in_flight_.empty()) return;
  const uint64_t known = completed_.load(std::memory_order_acquire);
  std::size_t passed = 0;  // in_flight_[0, passed) have passed
  while (passed < in_flight_.size() && in_flight_[passed].sequence <= known) ++passed;
  std::size_t pending = in_flight_.size();  // in_flight_[pending, size) have not
  if (EventDone(in_flight_.back().event, op)) {
    passed = pending;
  } else {
    pending -= 1;
    while (passed < pending) {
      const std::size_t mid = passed + (pending - passed) / 2;
      if (EventDone(in_flight_[mid].event, op)) {
        passed = mid + 1;
      } else {
        pending = mid;
      }
    }
  }
  if (passed == 0) return;
  NotePassed(in_flight_[passed - 1].sequence);
  for (std::size_t i = 0; i < passed; ++i) free_.push_back(in_flight_[i].event);
  in_flight_.erase(in_flight_.begin(), in_flight_.begin() + static_cast<std::ptrdiff_t>(passed));
}

bool SyncStream::QueryPassed(const StreamEvent& event) const {
  if (Passed(event)) return true;
  if (!EventDone(event.event, "(deferred check)")) return false;
  NotePassed(event.sequence);
  return true;
}

void SyncStream::NotePassed(uint64_t sequence) const {
  uint64_t known = completed_.load(std::memory_order_relaxed);
  while (known < sequence &&
         !completed_.compare_exchange_weak(known, sequence, std::memory_order_release,
                                           std::memory_order_relaxed)) {
  }
}

// Waits are reduced first to the newest event of each source stream: a
// wait on event n of a stream covers its events m <= n (stream order).
int SyncStream::WaitFor(std::span<const StreamEvent> events, std::string_view op) {
  absl::InlinedVector<StreamEvent, 8> newest;
  for (const StreamEvent& event : events) {
    if (event.stream == this || event.stream->Passed(event)) continue;  // nothing to wait for
    auto same = std::find_if(newest.begin(), newest.end(),
                             [&](const StreamEvent& e) { return e.stream == event.stream; });
    if (same == newest.end()) {
      newest.push_back(event);
    } else if (same->sequence < event.sequence) {
      *same = event;
    }
  }
  int issued = 0;
  SpinLockHolder lock(&mu_);
  for (const StreamEvent& event : newest) {
    const uint32_t source = event.stream->id();
    if (source >= waited_.size()) waited_.resize(source + 1, 0);
    uint64_t& waited = waited_[source];
    if (waited >= event.sequence) continue;  // a newer wait covers it
    CudaCheckForOp(cudaStreamWaitEvent(stream_, event.event, 0), "cudaStreamWaitEvent", op);
    waited = event.sequence;
    ++issued;
  }
  return issued;
}

std::size_t SyncStream::events_created() const {
  SpinLockHolder lock(&mu_);
  return created_;
}

void HostWaitFor(std::span<const StreamEvent> events, std::string_view op) {
  for (const StreamEvent& event : events) {
    if (event.stream->Passed(event)) continue;
    CudaCheckForOp(cudaEventSynchronize(event.event), "cudaEventSynchronize", op);
    event.stream->NotePassed(event.sequence);  // later waiters skip it
  }
}

}  // namespace ember::engine::internal
