#include "engine/internal/cuda/gpu_timeline.h"

#include "engine/cuda/check.h"
#include "engine/cuda/scoped_device.h"
#include "engine/internal/profiler.h"

namespace ember::engine::internal {

GpuTimeline::GpuTimeline(Profiler* profiler, int devices) : profiler_(profiler) {
  for (int d = 0; d < devices; ++d) {
    const ScopedDevice on_device(d);
    cudaEvent_t ref = nullptr;
    CudaCheck(cudaEventCreate(&ref), "cudaEventCreate (profile reference)");
    CudaCheck(cudaEventRecord(ref, nullptr), "cudaEventRecord (profile reference)");
    CudaCheck(cudaEventSynchronize(ref), "cudaEventSynchronize (profile reference)");
    refs_.push_back({ref, profiler->NowNs()});
  }
}

GpuTimeline::~GpuTimeline() {
  {
    MutexLock lock(&mu_);
    ResolveLocked(/*wait=*/true);
  }
  for (const Ref& ref : refs_) CudaLogIfError(cudaEventDestroy(ref.event), "cudaEventDestroy");
}

cudaEvent_t GpuTimeline::Mark(cudaStream_t stream) {
  cudaEvent_t event = nullptr;
  CudaCheck(cudaEventCreate(&event), "cudaEventCreate (profile)");
  CudaCheck(cudaEventRecord(event, stream), "cudaEventRecord (profile)");
  return event;
}

void GpuTimeline::Add(std::string name, int device, uint32_t stream_id, cudaEvent_t begin,
                      cudaEvent_t end) {
  MutexLock lock(&mu_);
  pending_.push_back({std::move(name), device, stream_id, begin, end});
  if (pending_.size() >= kResolveEvery) ResolveLocked(/*wait=*/false);
}

int64_t GpuTimeline::HostNs(int device, cudaEvent_t event) const {
  float ms = 0;
  CudaLogIfError(cudaEventElapsedTime(&ms, refs_[device].event, event), "cudaEventElapsedTime");
  return refs_[device].host_ns + static_cast<int64_t>(static_cast<double>(ms) * 1e6);
}

// Profiling is for understanding a run, not its speed: the final resolve
// may wait for events under the lock (the spans' order needs it).
void GpuTimeline::ResolveLocked(bool wait) {
  std::vector<Pending> unfinished;
  for (Pending& span : pending_) {
    if (!wait && cudaEventQuery(span.end) == cudaErrorNotReady) {
      (void)cudaGetLastError();  // "not ready" is an answer, not an error to keep
      unfinished.push_back(std::move(span));
      continue;
    }
    CudaLogIfError(cudaEventSynchronize(span.end), "cudaEventSynchronize (profile)");
    profiler_->StreamSpan(span.name, span.device, span.stream, HostNs(span.device, span.begin),
                          HostNs(span.device, span.end));
    CudaLogIfError(cudaEventDestroy(span.begin), "cudaEventDestroy");
    CudaLogIfError(cudaEventDestroy(span.end), "cudaEventDestroy");
  }
  pending_ = std::move(unfinished);
}

}  // namespace ember::engine::internal
