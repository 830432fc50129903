#pragma once

// GpuBackend: everything the engine asks of CUDA, behind a CUDA-free
// interface. A build with CUDA links gpu_backend_cuda.cc; a CPU-only build
// links no_cuda.cc, whose MakeGpuBackend returns null, so the engine carries
// no #if and a CPU-only engine pays nothing for GPU support.
//
// Per GPU op: a non-blocking stream, the worker thread's own per device
// (ThreadedEnginePerDevice) or one of a round-robin set (ThreadedEngine);
// OnStartGpu makes that stream wait for the op's inputs, OnCompleteGpu
// checks the launch and then either host-syncs the stream (plain engines)
// or records one event and hands it to every var the op touched (the Async
// engines: dependents are released right after the launch). Per CPU op of
// an Async engine, OnStartCpu host-waits for the GPU work on the op's vars.
// The backend sees an op only through GpuOp, a narrow view of its block.
//
// Thread safety: thread-safe; stream lookups are per calling thread.

#include <cstddef>
#include <memory>
#include <span>
#include <string_view>

#include "engine/engine_options.h"
#include "engine/internal/gpu_fence.h"

namespace ember::engine::internal {

class Profiler;
class Var;
struct VarLink;

// What the backend keeps per GPU op, in the op's block (OprBlock::gpu).
// Owned by the thread that runs the op: `stream` is set before the op runs
// (by its worker, or by the worker that lends it a stream before
// dispatching it), the rest by the backend while the op runs and completes.
struct GpuOpState {
  GpuStream stream;
  GpuFence fence;                       // Async: the event recorded after the launch
  CUevent_st* profile_begin = nullptr;  // profiling: a timing event before it
};

// The narrow view of an op that the backend is given: its name (for
// errors and profiles), its GPU, its normalized vars and its GPU state.
struct GpuOp {
  std::string_view name;
  int device = -1;
  std::span<const VarLink> links;
  GpuOpState& state;
};

class GpuBackend {
 public:
  virtual ~GpuBackend() = default;

  [[nodiscard]] virtual int device_count() const = 0;

  // The stream op `op` runs on, on `device`: `lent` when set (another
  // worker's, see worker_pool.h), else the calling thread's own (made on
  // first use), or the device's next shared stream in turn (ThreadedEngine).
  // The backend owns it. Sets `device` as the thread's current device.
  virtual GpuStream StreamFor(int device, std::string_view op, GpuStream lent) = 0;
  // Makes the calling worker thread's stream on `device` at `rank` (when it
  // starts, so that no op pays for it); the thread's later streams, on other
  // devices, take the same rank. Throws CudaError.
  virtual GpuStream StartWorker(int device, StreamRank rank) = 0;

  // Makes op.state.stream wait for the op's inputs (Async; the plain
  // engines synced them already). REQUIRES: op.state.stream is set.
  virtual void OnStartGpu(GpuOp op) = 0;
  // Throws CudaError (the op's error) when the launch failed. Then the
  // Async engines record the op's event in op.state.fence and hand it to
  // its vars; the plain engines host-sync the stream.
  virtual void OnCompleteGpu(GpuOp op) = 0;
  // A CPU op of an Async engine: host-waits for the GPU work on its vars.
  virtual void OnStartCpu(std::string_view op, std::span<const VarLink> links) = 0;

  // The Async engines: the event of the var's newest GPU write, if the GPU
  // may not have passed it yet; empty otherwise.
  [[nodiscard]] virtual GpuFence WriterFence(const Var& var) = 0;
  // Blocks the calling thread until `fence` has passed; throws CudaError
  // naming `who`.
  virtual void HostWait(const GpuFence& fence, std::string_view who) = 0;
  // Whether the GPU has passed `fence`, without blocking (an event query
  // when the stream's watermark does not tell).
  [[nodiscard]] virtual bool FencePassed(const GpuFence& fence) = 0;

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
