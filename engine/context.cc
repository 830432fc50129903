#include "engine/context.h"

#include <fmt/format.h>

namespace ember::engine {

std::string Context::ToString() const {
  return is_gpu() ? fmt::format("gpu({})", device_id) : std::string("cpu");
}

std::string_view ToString(FnProperty prop) {
  switch (prop) {
    case FnProperty::kNormal:
      return "Normal";
    case FnProperty::kCopyToGPU:
      return "CopyToGPU";
    case FnProperty::kCopyFromGPU:
      return "CopyFromGPU";
    case FnProperty::kCPUPrioritized:
      return "CPUPrioritized";
    case FnProperty::kGPUPrioritized:
      return "GPUPrioritized";
    case FnProperty::kAsync:
      return "Async";
    case FnProperty::kDeleteVar:
      return "DeleteVar";
    case FnProperty::kNoSkip:
      return "NoSkip";
  }
  return "Unknown";
}

}  // namespace ember::engine
