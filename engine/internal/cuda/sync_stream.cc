#include "engine/internal/cuda/sync_stream.h"

#include <algorithm>

#include "engine/internal/cuda/cuda_check.h"

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
// flight, so that one cudaEventQuery of the newest usually frees a batch
// (stream order: when it has passed, all have). Creates events while under
// the cap, and at the cap waits for the oldest.
cudaEvent_t SyncStream::FreeEvent(std::string_view op) {
  constexpr std::size_t kReapBatch = 8;
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

void SyncStream::Reap(bool block, std::string_view op) {
  if (in_flight_.empty()) return;
  if (block) {
    CudaCheckForOp(cudaEventSynchronize(in_flight_.front().event), "cudaEventSynchronize", op);
  }
  // The newest first: when it has passed, so has everything before it.
  std::size_t passed = 0;
  if (EventDone(in_flight_.back().event, op)) {
    passed = in_flight_.size();
  } else {
    while (passed + 1 < in_flight_.size() && EventDone(in_flight_[passed].event, op)) ++passed;
  }
  if (passed == 0) return;
  completed_.store(in_flight_[passed - 1].sequence, std::memory_order_release);
  for (std::size_t i = 0; i < passed; ++i) free_.push_back(in_flight_[i].event);
  in_flight_.erase(in_flight_.begin(), in_flight_.begin() + static_cast<std::ptrdiff_t>(passed));
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
  }
}

}  // namespace ember::engine::internal
