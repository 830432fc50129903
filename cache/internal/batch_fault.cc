#include "cache/internal/batch_fault.h"

#include <string>

#include <fmt/format.h>

#include "engine/error.h"

namespace ember::cache::internal {

void ThrowBatchFault(const char* op, const BatchFault& fault) {
  std::string what;
  switch (fault.kind) {
    case kFirstOffset:
      what = fmt::format("offsets[0] is {}; the first offset must be 0", fault.value);
      break;
    case kOffsetOutOfRange:
      what = fmt::format("offsets[{}] is {}, out of range [0, {}] (the number of indices)",
                         fault.position, fault.value, fault.bound);
      break;
    case kDecreasing:
      what = fmt::format("offsets[{}] is {}, below offsets[{}] = {}; offsets must not decrease",
                         fault.position, fault.value, fault.position - 1, fault.bound);
      break;
    case kLastOffset:
      what = fmt::format("offsets[{}] is {}; the last offset must be the number of indices, {}",
                         fault.position, fault.value, fault.bound);
      break;
    case kIndexOutOfRange:
      what = fmt::format("index {} is out of range [0, {}) (indices[{}])", fault.value, fault.bound,
                         fault.position);
      break;
    default:
      what = "no fault (internal error: reported without one)";
      break;
  }
  throw InvalidArgument(fmt::format("[{}] table {}, bag {}: {}", op, fault.table, fault.bag, what));
}

}  // namespace ember::cache::internal
