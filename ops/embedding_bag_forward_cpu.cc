// TBE forward on the CPU: the reference kernel. Table by table, bag by bag:
// each bag's rows (from their home rows, or their cache slots when
// TbeArgs::locations names one) are read whole and summed into an f32 row,
// which is scaled (mean) and stored once. Offsets and indices are checked
// as they are read (ops/internal/embedding_bag_fault.h gives the order), so
// the first bad entry is reported as the CUDA check kernel reports it.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "ops/internal/embedding_bag_fault.h"
#include "ops/internal/embedding_bag_kernels.h"
#include "storage/half.h"

namespace ember::ops::internal {
namespace {

// A weight element as f32: the row loop is instantiated per storage type so
// that the f32 case stays a plain vectorizable loop.
struct F32 {
  using Storage = float;
  static float Load(float v) { return v; }
};
struct F16 {
  using Storage = uint16_t;
  static float Load(uint16_t v) { return storage::HalfToFloat(v); }
};
struct BF16 {
  using Storage = uint16_t;
  static float Load(uint16_t v) { return storage::Bf16ToFloat(v); }
};

template <typename Index, typename Weight>
class ForwardCpu {
 public:
  ForwardCpu(const TbeArgs& args, const Index* indices, const Index* offsets)
      : args_(args),
        indices_(indices),
        offsets_(offsets),
        weights_(static_cast<const typename Weight::Storage*>(args.weights)) {}

  void Run() {
    for (int t = 0; t < args_.num_tables; ++t) {
      sum_.assign(static_cast<std::size_t>(args_.dims[t]), 0.0f);
      for (int64_t b = 0; b < args_.batch_size; ++b) PoolBag(t, b);
    }
  }

 private:
  void PoolBag(int t, int64_t b) {
    const int64_t dim = args_.dims[t];
    const int64_t g = t * args_.batch_size + b;
    const int64_t start = offsets_[g];
    const int64_t end = offsets_[g + 1];
    const TbeFault fault = CheckBagOffsets(t, b, g, args_.num_tables * args_.batch_size, start, end,
                                           args_.num_indices);
    if (fault.kind != TbeFaultKind::kNone) ThrowTbeFault(args_, fault);

    std::fill(sum_.begin(), sum_.end(), 0.0f);
    float* sum = sum_.data();
    const typename Weight::Storage* table = weights_ + args_.weight_offsets[t];
    for (int64_t i = start; i < end; ++i) {
      const int64_t index = indices_[i];
      if (!IndexInRange(index, args_.rows[t])) ThrowIndexFault(t, b, i, index);
      const float w = args_.per_sample_weights != nullptr ? args_.per_sample_weights[i] : 1.0f;
      const typename Weight::Storage* row = RowOf(table, index, dim, i);
      for (int64_t d = 0; d < dim; ++d) sum[d] += w * Weight::Load(row[d]);
    }
    const float scale = args_.mean && end > start ? 1.0f / static_cast<float>(end - start) : 1.0f;
    float* out = args_.out + b * args_.total_dim + args_.output_offsets[t];
    for (int64_t d = 0; d < dim; ++d) out[d] = sum[d] * scale;
  }

  // Where the row of the index at position i is: its slot when the cache
  // holds it (TbeArgs::locations), else its home row in the table.
  const typename Weight::Storage* RowOf(const typename Weight::Storage* table, int64_t index,
                                        int64_t dim, int64_t i) const {
    if (args_.locations != nullptr && args_.locations[i] >= 0) {
      return static_cast<const typename Weight::Storage*>(args_.slots) +
             int64_t{args_.locations[i]} * args_.slot_stride;
    }
    return table + index * dim;
  }

  [[noreturn]] void ThrowIndexFault(int t, int64_t b, int64_t position, int64_t index) const {
    TbeFault fault;
    fault.kind = TbeFaultKind::kIndexOutOfRange;
    fault.table = t;
    fault.bag = b;
    fault.position = position;
    fault.value = index;
    fault.bound = args_.rows[t];
    ThrowTbeFault(args_, fault);
  }

  const TbeArgs& args_;
  const Index* indices_;
  const Index* offsets_;
  const typename Weight::Storage* weights_;
  std::vector<float> sum_;  // one table's dim
};

template <typename Index>
void ForwardIndexed(const TbeArgs& args, const Index* indices, const Index* offsets) {
  switch (args.weight_type) {
    case WeightType::kF32:
      ForwardCpu<Index, F32>(args, indices, offsets).Run();
      break;
    case WeightType::kF16:
      ForwardCpu<Index, F16>(args, indices, offsets).Run();
      break;
    case WeightType::kBF16:
      ForwardCpu<Index, BF16>(args, indices, offsets).Run();
      break;
  }
}

}  // namespace

void TbeForwardCpu(const TbeArgs& args) {
  if (args.offsets32 != nullptr) {
    ForwardIndexed(args, args.indices32, args.offsets32);
  } else {
    ForwardIndexed(args, args.indices64, args.offsets64);
  }
}

}  // namespace ember::ops::internal
