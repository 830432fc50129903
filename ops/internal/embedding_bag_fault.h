#pragma once

// A bad entry of a TBE batch (embedding_bag.h, "Validation"), as the CPU
// kernels, the CUDA check kernels and ValidateTbeBatch report it, so that
// all find the same entry and say the same words.
//
// Which entry: the first bad bag in (table, bag) order, g = t * B + b; in
// that bag, the checks of CheckBagOffsets in its order, then the first
// index out of range. Bag g owns offsets[g] and offsets[g + 1], so a bad
// offset shows in the first bag that reads it.
//
// This header is plain C++17 (device code compiles as C++17): the constexpr
// checks run on the host and, with --expt-relaxed-constexpr, on the GPU.
//
// Thread safety: plain values and pure functions.

#include <cstdint>
#include <string>
#include <string_view>

#include "ops/internal/embedding_bag_args.h"

namespace ember::ops::internal {

enum class TbeFaultKind : int32_t {
  kNone = 0,
  kFirstOffset,       // offsets[0] != 0
  kOffsetOutOfRange,  // an offset outside [0, num_indices]
  kDecreasing,        // offsets[g + 1] < offsets[g]
  kLastOffset,        // offsets[T * B] != num_indices
  kIndexOutOfRange,   // indices[position] outside [0, rows[t])
};

struct TbeFault {
  TbeFaultKind kind = TbeFaultKind::kNone;
  int32_t table = 0;
  int64_t bag = 0;       // within the table
  int64_t position = 0;  // of `value` in offsets or indices
  int64_t value = 0;
  int64_t bound = 0;  // rows[t], num_indices, or the offset `value` fell below
};

// The first fault of bag g = table * B + bag (of num_bags = T * B) in its
// offsets `start` = offsets[g] and `end` = offsets[g + 1], or kNone.
constexpr TbeFault CheckBagOffsets(int32_t table, int64_t bag, int64_t g, int64_t num_bags,
                                   int64_t start, int64_t end, int64_t num_indices) {
  TbeFault fault;
  fault.table = table;
  fault.bag = bag;
  if (g == 0 && start != 0) {
    fault.kind = TbeFaultKind::kFirstOffset;
    fault.position = 0;
    fault.value = start;
  } else if (start < 0 || start > num_indices) {
    fault.kind = TbeFaultKind::kOffsetOutOfRange;
    fault.position = g;
    fault.value = start;
    fault.bound = num_indices;
  } else if (end < start) {
    fault.kind = TbeFaultKind::kDecreasing;
    fault.position = g + 1;
    fault.value = end;
    fault.bound = start;
  } else if (end > num_indices) {
    fault.kind = TbeFaultKind::kOffsetOutOfRange;
    fault.position = g + 1;
    fault.value = end;
    fault.bound = num_indices;
  } else if (g + 1 == num_bags && end != num_indices) {
    fault.kind = TbeFaultKind::kLastOffset;
    fault.position = g + 1;
    fault.value = end;
    fault.bound = num_indices;
  }
  return fault;
}

constexpr bool IndexInRange(int64_t index, int64_t rows) { return index >= 0 && index < rows; }

// The op that `args` are for: "EmbeddingBagForward" when args.out is set,
// else "EmbeddingBagBackward" and the optimizer ("...Sgd", ...).
const char* TbeOpName(const TbeArgs& args);

// "[op] table t, bag b: <what>", e.g. "[EmbeddingBagForward] table 2, bag
// 17: index 1000 is out of range [0, 1000) (indices[523])". REQUIRES:
// fault.kind != kNone.
std::string DescribeTbeFault(std::string_view op, const TbeFault& fault);

// Throws InvalidArgument(DescribeTbeFault(TbeOpName(args), fault)).
[[noreturn]] void ThrowTbeFault(const TbeArgs& args, const TbeFault& fault);

// The first fault of args' batch, in the order above (kNone: the batch is
// good), read from host memory: args' batch and per-table arrays must point
// there. One pass over the offsets and indices; allocates nothing.
TbeFault FirstTbeFault(const TbeArgs& args);

}  // namespace ember::ops::internal
