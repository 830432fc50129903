#pragma once

// MemoryCounters: a manager's MemoryStats, kept up to date under the
// manager's own lock.
//
// Thread safety: not synchronized (the owner's lock guards it).

#include <algorithm>
#include <cstddef>

#include "storage/memory.h"

namespace ember::storage::internal {

class MemoryCounters {
 public:
  void Reserve(std::size_t bytes) {
    stats_.reserved += bytes;
    ++stats_.system_allocations;
    stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
  }
  void Unreserve(std::size_t bytes) { stats_.reserved -= bytes; }
  void HandOut(std::size_t bytes) {
    stats_.allocated += bytes;
    ++stats_.allocations;
    stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
  }
  void TakeBack(std::size_t bytes) { stats_.allocated -= bytes; }
  void ResetPeaks() {
    stats_.peak_allocated = stats_.allocated;
    stats_.peak_reserved = stats_.reserved;
  }
  [[nodiscard]] const MemoryStats& stats() const { return stats_; }

 private:
  MemoryStats stats_;
};

}  // namespace ember::storage::internal
