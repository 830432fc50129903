// Fences on CUDA events (see fences.h): one event pool per device.

#include <memory>
#include <vector>

#include <cuda_runtime_api.h>

#include "engine/base/device.h"
#include "engine/base/mutex.h"
#include "engine/cuda/check.h"
#include "storage/internal/fences.h"

namespace ember::storage::internal {
namespace {

class EventPools {
 public:
  EventPools() : pools_(std::max(1, GpuCount())) {}

  cudaEvent_t Take(int device) {
    Pool& pool = pools_.at(device);
    {
      MutexLock lock(&pool.mu);
      if (!pool.free.empty()) {
        cudaEvent_t event = pool.free.back();
        pool.free.pop_back();
        return event;
      }
    }
    int previous = 0;
    CudaCheck(cudaGetDevice(&previous), "cudaGetDevice");
    if (previous != device) CudaCheck(cudaSetDevice(device), "cudaSetDevice");
    cudaEvent_t event = nullptr;
    const cudaError_t status = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
    if (previous != device) CudaCheck(cudaSetDevice(previous), "cudaSetDevice (restore)");
    CudaCheck(status, "cudaEventCreateWithFlags (storage fence)");
    return event;
  }

  void Return(const Fence& fence) {
    Pool& pool = pools_.at(fence.device);
    MutexLock lock(&pool.mu);
    pool.free.push_back(static_cast<cudaEvent_t>(fence.event));
  }

 private:
  struct Pool {
    Mutex mu;
    std::vector<cudaEvent_t> free ABSL_GUARDED_BY(mu);
  };
  std::vector<Pool> pools_;
};

// Process-wide and never destroyed: buffers may be released during exit.
EventPools& Pools() {
  static auto* pools = new EventPools();
  return *pools;
}

}  // namespace

std::vector<Fence> RecordFences(const std::vector<void*>& streams) {
  std::vector<Fence> fences;
  for (void* stream : streams) {
    if (stream == nullptr) continue;
    auto* cuda_stream = static_cast<cudaStream_t>(stream);
    int device = 0;
    CudaCheck(cudaStreamGetDevice(cuda_stream, &device), "cudaStreamGetDevice (storage fence)");
    cudaEvent_t event = Pools().Take(device);
    const cudaError_t status = cudaEventRecord(event, cuda_stream);
    if (status != cudaSuccess) {
      Pools().Return(Fence{stream, event, device});
      CudaCheck(status, "cudaEventRecord (storage fence)");
    }
    fences.push_back(Fence{stream, event, device});
  }
  return fences;
}

void OrderAfter(std::vector<Fence>& fences, void* stream) {
  for (const Fence& fence : fences) {
    auto* event = static_cast<cudaEvent_t>(fence.event);
    if (stream == nullptr) {
      CudaCheck(cudaEventSynchronize(event), "cudaEventSynchronize (storage reuse on the host)");
    } else if (fence.stream != stream) {
      CudaCheck(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), event, 0),
                "cudaStreamWaitEvent (storage reuse)");
    }
    Pools().Return(fence);
  }
  fences.clear();
}

bool DropPassed(std::vector<Fence>& fences) {
  std::erase_if(fences, [](const Fence& fence) {
    const cudaError_t status = cudaEventQuery(static_cast<cudaEvent_t>(fence.event));
    if (status == cudaErrorNotReady) {
      (void)cudaGetLastError();  // an answer, not an error to keep
      return false;
    }
    CudaCheck(status, "cudaEventQuery (storage fence)");
    Pools().Return(fence);
    return true;
  });
  return fences.empty();
}

void HostWait(std::vector<Fence>& fences) { OrderAfter(fences, nullptr); }

}  // namespace ember::storage::internal
