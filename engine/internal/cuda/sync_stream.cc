#include "engine/internal/cuda/sync_stream.h"

#include <fmt/format.h>

#include "engine/internal/cuda/cuda_check.h"

namespace ember::engine::internal {

int SyncStream::WaitFor(const std::vector<EventRef>& events, std::string_view op) {
  int issued = 0;
  for (const EventRef& event : events) {
    if (event->stream_id == id_) continue;  // stream order covers it
    uint64_t& waited = waited_[event->stream_id];
    if (waited >= event->sequence) continue;  // a newer wait covers it
    CudaCheck(cudaStreamWaitEvent(stream_, event->event, 0),
              fmt::format("cudaStreamWaitEvent for op '{}'", op));
    waited = event->sequence;
    ++issued;
  }
  return issued;
}

void HostWaitFor(const std::vector<EventRef>& events, std::string_view op) {
  for (const EventRef& event : events) {
    CudaCheck(cudaEventSynchronize(event->event),
              fmt::format("cudaEventSynchronize for op '{}'", op));
  }
}

}  // namespace ember::engine::internal
