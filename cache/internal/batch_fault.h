#pragma once

// A bad offset or index of a batch, found by the CPU kernels as they
// linearize it or by a CUDA kernel (which records the first one in a
// BatchFault for the host), worded as ops' TBE validation words it:
// "[op] table t, bag b: index 70 is out of range [0, 50) (indices[12])".
//
// Thread safety: plain values; ThrowBatchFault is a pure function.

#include <cstdint>

#include "cache/internal/cache_args.h"

#if defined(__CUDACC__)
#define EMBER_FAULT_HD __host__ __device__
#else
#define EMBER_FAULT_HD
#endif

namespace ember::cache::internal {

enum BatchFaultKind : int32_t {
  kNoFault = 0,
  kFirstOffset,       // offsets[0] != 0
  kOffsetOutOfRange,  // an offset outside [0, num_indices]
  kDecreasing,        // offsets[j] < offsets[j - 1]
  kLastOffset,        // offsets[T * B] != num_indices
  kIndexOutOfRange,   // an index outside [0, rows of its table)
};

struct BatchFault {
  int32_t kind = kNoFault;
  int32_t table = 0;
  int64_t bag = 0;       // within its table
  int64_t position = 0;  // the offset's or the index's position
  int64_t value = 0;
  int64_t bound = 0;
};

// Throws InvalidArgument "[op] table t, bag b: what" for a fault.
[[noreturn]] void ThrowBatchFault(const char* op, const BatchFault& fault);

EMBER_FAULT_HD inline int64_t OffsetAt(const BatchArgs& batch, int64_t j) {
  return batch.offsets32 != nullptr ? batch.offsets32[j] : batch.offsets64[j];
}
EMBER_FAULT_HD inline int64_t IndexAt(const BatchArgs& batch, int64_t k) {
  return batch.indices32 != nullptr ? batch.indices32[k] : batch.indices64[k];
}

// The fault of offset j (0 <= j <= T * B), if any.
EMBER_FAULT_HD inline BatchFault CheckOffset(const BatchArgs& batch, int num_tables, int64_t j) {
  BatchFault fault;
  const int64_t bags = num_tables * batch.batch_size;
  const int64_t value = OffsetAt(batch, j);
  const int64_t bag = j < bags ? j : bags - 1;
  fault.table = static_cast<int32_t>(batch.batch_size > 0 ? bag / batch.batch_size : 0);
  fault.bag = batch.batch_size > 0 ? bag % batch.batch_size : 0;
  fault.position = j;
  fault.value = value;
  if (j == 0 && value != 0) {
    fault.kind = kFirstOffset;
  } else if (value < 0 || value > batch.num_indices) {
    fault.kind = kOffsetOutOfRange;
    fault.bound = batch.num_indices;
  } else if (j > 0 && value < OffsetAt(batch, j - 1)) {
    fault.kind = kDecreasing;
    fault.bound = OffsetAt(batch, j - 1);
  } else if (j == bags && value != batch.num_indices) {
    fault.kind = kLastOffset;
    fault.bound = batch.num_indices;
  }
  return fault;
}

}  // namespace ember::cache::internal
