// The words of a bad TBE entry, and the host's scan for the first one
// (embedding_bag_fault.h).

#include "ops/internal/embedding_bag_fault.h"

#include <fmt/format.h>

#include "engine/error.h"

namespace ember::ops::internal {
namespace {

// Whether the batch has no fault: the offsets start at 0, never decrease
// and end at the number of indices (so all lie in range), and each table's
// indices (a contiguous run, given such offsets) lie in its rows. Its loops
// have no early exit and no division, so they vectorize: a good batch,
// which is every batch but one, costs a streaming read (a DLRM batch of
// 426k indices took 2.6 ms a step in FirstFault's scan alone). Only where
// this says no does that scan run, to name the first fault.
template <typename Index>
bool NoFault(const TbeArgs& args, const Index* indices, const Index* offsets) {
  const int64_t batch = args.batch_size;
  const int64_t num_bags = int64_t{args.num_tables} * batch;
  if (num_bags == 0) return true;  // FirstFault checks nothing either
  if (offsets[0] != 0 || offsets[num_bags] != args.num_indices) return false;
  bool bad = false;
  for (int64_t g = 0; g < num_bags; ++g) bad |= offsets[g + 1] < offsets[g];
  if (bad) return false;
  for (int32_t t = 0; t < args.num_tables; ++t) {
    // A negative index wraps to past any row count.
    const auto rows = static_cast<uint64_t>(args.rows[t]);
    const int64_t end = offsets[(t + 1) * batch];
    for (int64_t i = offsets[t * batch]; i < end; ++i) {
      bad |= static_cast<uint64_t>(static_cast<int64_t>(indices[i])) >= rows;
    }
  }
  return !bad;
}

template <typename Index>
TbeFault FirstFault(const TbeArgs& args, const Index* indices, const Index* offsets) {
  if (NoFault(args, indices, offsets)) return {};
  const int64_t batch = args.batch_size;
  const int64_t num_bags = int64_t{args.num_tables} * batch;
  for (int64_t g = 0; g < num_bags; ++g) {
    const auto t = static_cast<int32_t>(g / batch);
    const int64_t b = g - t * batch;
    const int64_t start = offsets[g];
    const int64_t end = offsets[g + 1];
    TbeFault fault = CheckBagOffsets(t, b, g, num_bags, start, end, args.num_indices);
    if (fault.kind != TbeFaultKind::kNone) return fault;
    const int64_t rows = args.rows[t];
    for (int64_t i = start; i < end; ++i) {
      if (IndexInRange(indices[i], rows)) continue;
      fault.kind = TbeFaultKind::kIndexOutOfRange;
      fault.position = i;
      fault.value = indices[i];
      fault.bound = rows;
      return fault;
    }
  }
  return {};
}

}  // namespace

const char* TbeOpName(const TbeArgs& args) {
  if (args.out != nullptr) return "EmbeddingBagForward";
  switch (args.optimizer) {
    case OptimizerKind::kSgd:
      return "EmbeddingBagBackwardSgd";
    case OptimizerKind::kRowwiseAdagrad:
      return "EmbeddingBagBackwardRowwiseAdagrad";
    case OptimizerKind::kAdam:
      return "EmbeddingBagBackwardAdam";
  }
  return "EmbeddingBag";
}

std::string DescribeTbeFault(std::string_view op, const TbeFault& fault) {
  std::string what;
  switch (fault.kind) {
    case TbeFaultKind::kNone:
      what = "no fault (internal error: reported without one)";
      break;
    case TbeFaultKind::kFirstOffset:
      what = fmt::format("offsets[0] is {}; the first offset must be 0", fault.value);
      break;
    case TbeFaultKind::kOffsetOutOfRange:
      what = fmt::format("offsets[{}] is {}, out of range [0, {}] (the number of indices)",
                         fault.position, fault.value, fault.bound);
      break;
    case TbeFaultKind::kDecreasing:
      what = fmt::format("offsets[{}] is {}, below offsets[{}] = {}; offsets must not decrease",
                         fault.position, fault.value, fault.position - 1, fault.bound);
      break;
    case TbeFaultKind::kLastOffset:
      what = fmt::format("offsets[{}] is {}; the last offset must be the number of indices, {}",
                         fault.position, fault.value, fault.bound);
      break;
    case TbeFaultKind::kIndexOutOfRange:
      what = fmt::format("index {} is out of range [0, {}) (indices[{}])", fault.value, fault.bound,
                         fault.position);
      break;
  }
  return fmt::format("[{}] table {}, bag {}: {}", op, fault.table, fault.bag, what);
}

void ThrowTbeFault(const TbeArgs& args, const TbeFault& fault) {
  throw InvalidArgument(DescribeTbeFault(TbeOpName(args), fault));
}

TbeFault FirstTbeFault(const TbeArgs& args) {
  if (args.offsets32 != nullptr) return FirstFault(args, args.indices32, args.offsets32);
  return FirstFault(args, args.indices64, args.offsets64);
}

}  // namespace ember::ops::internal
