#include "engine/internal/cuda/sync_stream.h"

#include <algorithm>

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

SyncStream::~SyncStream() {
  SpinLockHolder lock(&mu_);
  CudaLogIfError(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (shutdown)");
  for (const InFlight& entry : in_flight_) free_.push_back(entry.event);
  for (cudaEvent_t event : free_) CudaLogIfError(cudaEventDestroy(event), "cudaEventDestroy");
  CudaLogIfError(cudaStreamDestroy(stream_), "cudaStreamDestroy");
}

StreamEvent SyncStream::Record(std::string_view op) {
  SpinLockHolder lock(&mu_);
  cudaEvent_t event = FreeEvent(op);
  const cudaError_t status = cudaEventRecord(event, stream_);
  if (status != cudaSuccess) {
    free_.push_back(event);
    CudaCheckForOp(status, "cudaEventRecord", op);
  }
  in_flight_.push_back({++last_sequence_, event});
  return StreamEvent{this, last_sequence_, event};
}

// Reuses a passed event; looks for passed ones only once kReapBatch are in
// flight, so that one reap (a few cudaEventQuery calls, see Reap) frees a
// large batch: a query costs 0.3 us when the event has completed and about
// 2 us when it has not (H100, CUDA 13), against about 4 us for a launch, so
// reaping every 32 ops cost 0.2 us an op. Creates events while under the
// cap, and at the cap waits for the oldest.
cudaEvent_t SyncStream::FreeEvent(std::string_view op) {
  constexpr std::size_t kReapBatch = 128;
  if (free_.empty() && in_flight_.size() >= std::min(kReapBatch, max_events_)) {
    Reap(/*block=*/false, op);
  }
  if (free_.empty() && created_ < max_events_) {
    cudaEvent_t event = nullptr;
    CudaCheckForOp(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                   "cudaEventCreateWithFlags", op);
    ++created_;
    return event;
  }
  if (free_.empty()) Reap(/*block=*/true, op);
  cudaEvent_t event = free_.back();
  free_.pop_back();
  return event;
}

// Stream order makes the passed events a prefix of in_flight_: the newest
// is asked first (an idle stream has passed everything), then the prefix's
// end is found by bisection, so a reap costs O(log n) queries for n events
// (asking each in turn cost one query per event, about one per op).
void SyncStream::Reap(bool block, std::string_view op) {
  if (in_flight_.empty()) return;
  std::size_t passed = 0;  // in_flight_[0, passed) have passed
  if (block) {
    CudaCheckForOp(cudaEventSynchronize(in_flight_.front().event), "cudaEventSynchronize", op);
    passed = 1;
  }
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

void SyncStream::NotePassed(uint64_t sequence) const {
  uint64_t known = completed_.load(std::memory_order_relaxed);
  while (known < sequence &&
         !completed_.compare_exchange_weak(known, sequence, std::memory_order_release,
                                           std::memory_order_relaxed)) {
  }
}

int SyncStream::WaitFor(std::span<const StreamEvent> events, std::string_view op) {
  int issued = 0;
  SpinLockHolder lock(&mu_);
  for (const StreamEvent& event : events) {
    if (event.stream == this) continue;  // stream order covers it
    if (event.stream->Passed(event)) continue;
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
