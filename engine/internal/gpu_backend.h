#pragma once

// GpuBackend: everything the engine asks of CUDA, behind a CUDA-free
// interface. A build with CUDA links gpu_backend_cuda.cc; a CPU-only build
// links no_cuda.cc, whose MakeGpuBackend returns null, so the engine carries
// no #if and a CPU-only engine pays nothing for GPU support.
//
// Per GPU op: a non-blocking stream, the worker thread's own per device
// (ThreadedEnginePerDevice) or one of a round-robin set (ThreadedEngine); OnStartGpu makes that
// stream wait for the op's inputs, OnCompleteGpu checks the launch and then either host-syncs the
// stream (plain engines) or records one event and hands it to every var the
// op touched (the Async engines: dependents are released right after the
// launch). Per CPU op of an Async engine, OnStartCpu host-waits for the GPU
// work on the op's vars.
//
// Thread safety: thread-safe; stream lookups are per calling thread.

#include <cstddef>
#include <memory>
#include <string_view>

#include "engine/engine_options.h"
#include "engine/internal/gpu_fence.h"

namespace ember::engine::internal {

struct OprBlock;
class Profiler;
class Var;

// A worker thread's stream on one device: the backend's bookkeeping object
// and the cudaStream_t, both opaque here.
struct ThreadStream {
  void* sync = nullptr;
  void* cuda = nullptr;
};

class GpuBackend {
 public:
  virtual ~GpuBackend() = default;

  [[nodiscard]] virtual int device_count() const = 0;

  // The stream op `op` runs on, on `device`: `lent` when set (another
  // worker's, see worker_pool.h), else the calling thread's own (made on
  // first use), or the device's next shared stream in turn (ThreadedEngine).
  // The backend owns it. Sets `device` as the thread's current device.
  virtual ThreadStream StreamFor(int device, std::string_view op, ThreadStream lent) = 0;

  // REQUIRES: block->stream is the running thread's stream.
  virtual void OnStartGpu(OprBlock* block) = 0;
  // Throws CudaError (the op's error) when the launch failed. The Async
  // engines record the op's event in block->fence.
  virtual void OnCompleteGpu(OprBlock* block) = 0;
  virtual void OnStartCpu(OprBlock* block) = 0;

  // The Async engines: the event of the var's newest GPU write, if the GPU
  // may not have passed it yet; empty otherwise.
  [[nodiscard]] virtual GpuFence WriterFence(const Var& var) = 0;
  // Blocks the calling thread until `fence` has passed; throws CudaError
  // naming `who`.
  virtual void HostWait(const GpuFence& fence, std::string_view who) = 0;

  // The var is deleted: forget its events.
  virtual void ForgetVar(const Var* var) = 0;
  // Blocks until every stream of the backend is idle; throws CudaError.
  virtual void SynchronizeAll() = 0;

  // Profiling: GPU spans (timed with CUDA events) and host waits go to
  // `profiler`, which must outlive the backend. Null stops it.
  virtual void SetProfiler(Profiler* profiler) = 0;
  // NVTX ranges around every op, named after it (no-ops without a tool).
  virtual void RangePush(const char* name) = 0;
  virtual void RangePop() = 0;
};

// A backend for every visible GPU, or null when there is none (or no CUDA in
// this build). options.async_gpu selects the Async engines' event tracking.
std::unique_ptr<GpuBackend> MakeGpuBackend(const EngineOptions& options);

}  // namespace ember::engine::internal
