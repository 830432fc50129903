#include "engine/internal/cuda/sync_stream.h"

#include "engine/internal/cuda/cuda_check.h"

namespace ember::engine::internal {

int SyncStream::WaitFor(const std::vector<EventRef>& events, std::string_view op) {
  int issued = 0;
  for (const EventRef& event : events) {
    if (event->stream_id == id_) continue;  // stream order covers it
    uint64_t& waited = waited_[event->stream_id];
    if (waited >= event->sequence) continue;  // a newer wait covers it
    CudaCheckForOp(cudaStreamWaitEvent(stream_, event->event, 0), "cudaStreamWaitEvent", op);
    waited = event->sequence;
    ++issued;
  }
  return issued;
}

void HostWaitFor(const std::vector<EventRef>& events, std::string_view op) {
  for (const EventRef& event : events) {
    CudaCheckForOp(cudaEventSynchronize(event->event), "cudaEventSynchronize", op);
  }
}

}  // namespace ember::engine::internal
