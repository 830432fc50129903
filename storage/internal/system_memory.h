#pragma once

// SystemMemory: where a caching pool gets its blocks (cudaMalloc,
// cudaHostAlloc, cudaMallocManaged, ...). Allocations here are slow and
// some frees synchronize the device, which is why the pool caches.
//
// Thread safety: thread-safe.

#include <cstddef>
#include <string>

namespace ember::storage::internal {

class SystemMemory {
 public:
  virtual ~SystemMemory() = default;
  // Null when the system is out of memory; throws for other failures.
  virtual void* Allocate(std::size_t bytes) = 0;
  virtual void Free(void* data) = 0;
  // The system's state for out-of-memory messages, e.g. "gpu(0): 1.2 GiB
  // free of 79.1 GiB".
  [[nodiscard]] virtual std::string Describe() const = 0;
  // True when allocating `bytes` more would eat into the memory the pool
  // must leave free: the pool drops its cache first.
  [[nodiscard]] virtual bool WouldCrossReserve(std::size_t /*bytes*/) const { return false; }
};

}  // namespace ember::storage::internal
