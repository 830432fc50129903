#include "engine/internal/cuda/event_pool.h"

#include "engine/internal/cuda/cuda_check.h"

namespace ember::engine::internal {
namespace {

// Makes `device` current for the scope: events belong to the device that is
// current when they are created.
class ScopedDevice {
 public:
  explicit ScopedDevice(int device) {
    CudaCheck(cudaGetDevice(&previous_), "cudaGetDevice");
    if (previous_ != device) CudaCheck(cudaSetDevice(device), "cudaSetDevice");
  }
  ~ScopedDevice() { CudaLogIfError(cudaSetDevice(previous_), "cudaSetDevice (restore)"); }
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace

std::shared_ptr<EventPool> EventPool::Create(int device, std::size_t max_cached) {
  return std::shared_ptr<EventPool>(new EventPool(device, max_cached));
}

EventPool::~EventPool() {
  MutexLock lock(&mu_);
  for (cudaEvent_t event : free_) CudaLogIfError(cudaEventDestroy(event), "cudaEventDestroy");
}

cudaEvent_t EventPool::Take() {
  {
    MutexLock lock(&mu_);
    if (!free_.empty()) {
      cudaEvent_t event = free_.back();
      free_.pop_back();
      return event;
    }
    ++created_;
  }
  ScopedDevice device(device_);
  cudaEvent_t event = nullptr;
  CudaCheck(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  return event;
}

void EventPool::Return(cudaEvent_t event) {
  {
    MutexLock lock(&mu_);
    if (free_.size() < max_cached_) {
      free_.push_back(event);
      return;
    }
  }
  CudaLogIfError(cudaEventDestroy(event), "cudaEventDestroy");
}

EventRef EventPool::Record(SyncStream& stream) {
  cudaEvent_t event = Take();
  const cudaError_t status = cudaEventRecord(event, stream.get());
  if (status != cudaSuccess) {
    Return(event);
    CudaCheck(status, "cudaEventRecord");
  }
  auto* recorded = new RecordedEvent{event, stream.id(), stream.NextSequence()};
  return EventRef(recorded, [pool = shared_from_this()](const RecordedEvent* done) {
    pool->Return(done->event);
    delete done;
  });
}

std::size_t EventPool::cached() const {
  MutexLock lock(&mu_);
  return free_.size();
}

std::size_t EventPool::created() const {
  MutexLock lock(&mu_);
  return created_;
}

}  // namespace ember::engine::internal
