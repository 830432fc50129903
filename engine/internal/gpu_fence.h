#pragma once

// GpuFence: a point in one CUDA stream's work, as the backend recorded it
// (its stream's bookkeeping object, the event's sequence number on that
// stream, and the cudaEvent_t), opaque here so that the engine's CUDA-free
// parts can hold one. Empty (stream null) means "no GPU work to wait for".
// What it refers to belongs to the backend, which outlives every fence.
//
// Thread safety: a plain value.

#include <cstdint>

namespace ember::engine::internal {

struct GpuFence {
  const void* stream = nullptr;
  uint64_t sequence = 0;
  void* event = nullptr;

  [[nodiscard]] bool empty() const { return stream == nullptr; }
};

}  // namespace ember::engine::internal
