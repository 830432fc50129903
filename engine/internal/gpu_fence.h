#pragma once

// GpuFence and GpuStream: a point in one CUDA stream's work, and a worker's
// stream, as the engine's CUDA-free code holds them. The pointers are typed
// with CUDA's own opaque struct names (cudaStream_t is CUstream_st*,
// cudaEvent_t is CUevent_st*) and the backend's SyncStream, forward
// declared, so that nothing here includes a CUDA header and nothing is a
// void* to cast back. What they point to belongs to the backend, which
// outlives them.
//
// Thread safety: plain values.

#include <cstdint>

struct CUstream_st;
struct CUevent_st;

namespace ember::engine::internal {

class SyncStream;

// A point in a stream's work: the stream, the sequence number of the event
// recorded there (see sync_stream.h) and that event. Empty (stream null)
// means "no GPU work to wait for".
struct GpuFence {
  const SyncStream* stream = nullptr;
  uint64_t sequence = 0;
  CUevent_st* event = nullptr;

  [[nodiscard]] bool empty() const { return stream == nullptr; }
};

// A worker thread's stream on one device: the backend's bookkeeping for it
// and the CUDA stream. Empty (both null) means none (yet).
struct GpuStream {
  SyncStream* sync = nullptr;
  CUstream_st* cuda = nullptr;

  explicit operator bool() const { return sync != nullptr; }
};

// Where a worker's stream stands when the SMs are shared: when a block of
// one kernel retires, the scheduler starts a pending block of the stream
// with the higher priority first (running blocks are not preempted). Copy
// pools rank lowest: their ops that run on the SMs (the cache's prefetch
// reading rows over PCIe, its write-back) then take what the compute
// kernels leave. Prioritized ops rank highest.
enum class StreamRank : uint8_t { kCopy, kCompute, kPrioritized };

}  // namespace ember::engine::internal
