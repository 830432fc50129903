#pragma once

// What the storage layer hands out and reports: kinds of memory, their
// statistics, and the error for memory that cannot be had.
//
// Thread safety: plain values.

#include <cstddef>
#include <string>
#include <string_view>

#include "engine/error.h"

namespace ember::storage {

enum class MemoryKind {
  kCpu,     // pageable host memory, 64-byte aligned
  kPinned,  // page-locked host memory (cudaHostAlloc), pooled
  kDevice,  // GPU memory: a pool, or CUDA's stream-ordered allocator
  kUvm,     // managed memory preferring the CPU, accessed by the GPU (or host-mapped)
};

std::string_view ToString(MemoryKind kind);

// Bytes of one manager (one kind on one device). `allocated` counts blocks
// handed out (at their rounded size), `reserved` what the manager holds from
// the system: handed out plus cached for reuse. Peaks since creation or the
// last ResetPeaks().
struct MemoryStats {
  std::size_t allocated = 0;
  std::size_t reserved = 0;
  std::size_t peak_allocated = 0;
  std::size_t peak_reserved = 0;
  std::size_t allocations = 0;         // buffers handed out so far
  std::size_t system_allocations = 0;  // calls to the system allocator so far

  [[nodiscard]] std::string ToString() const;
};

// An allocation that cannot be satisfied, even after releasing cached
// memory. The message gives the size asked for and the manager's state.
class OutOfMemory : public Error {
 public:
  using Error::Error;
};

}  // namespace ember::storage
