#include "storage/memory.h"

#include <fmt/format.h>

namespace ember::storage {

std::string_view ToString(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kCpu:
      return "cpu";
    case MemoryKind::kPinned:
      return "pinned";
    case MemoryKind::kDevice:
      return "device";
    case MemoryKind::kUvm:
      return "uvm";
  }
  return "unknown";
}

std::string MemoryStats::ToString() const {
  return fmt::format(
      "allocated {} B (peak {}), reserved {} B (peak {}), cached {} B, {} allocations, {} from the "
      "system",
      allocated, peak_allocated, reserved, peak_reserved, reserved - allocated, allocations,
      system_allocations);
}

}  // namespace ember::storage
