// TbeBackwardCpu: the reference backward of embedding_bag.h ("Backward"),
// fused with the optimizer step.
//
// Per table: gather the batch's (row, bag, scale) occurrences, checking
// offsets and indices as the forward does (ops/internal/embedding_bag_fault.h
// finds the same first fault and ThrowTbeFault words it alike); stable-sort
// them by row, so that a row's occurrences stay in index order; reduce each
// distinct row's gradient; apply the optimizer once per distinct row.
//
// Precision: a row's gradient is summed in f64 (each term w_i * s_b * grad,
// in index order) and rounded once to f32; the optimizer then runs in f32
// on weights loaded as f32 (f16/bf16 widened exactly) and stores them
// rounded to nearest even (storage/half.h). f64 sums keep the reference close to
// the exact gradient, so that tests can bound the GPU's f32 sums against it.
// Adam's bias corrections 1 - beta^step are computed in f64 and rounded to
// f32, as the CUDA kernel's host code does.
//
// Every check runs before the first weight is written: a bad batch throws
// and leaves weights and optimizer state untouched.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "ops/internal/embedding_bag_fault.h"
#include "ops/internal/embedding_bag_kernels.h"
#include "storage/half.h"

namespace ember::ops::internal {
namespace {

// One lookup of a row: the bag whose gradient it receives, and the factor
// w_i * s_b that gradient is scaled by.
struct Occurrence {
  int64_t row = 0;  // within its table
  int64_t bag = 0;  // within the batch
  double scale = 1.0;
  int64_t position = 0;  // in the batch's indices
};

int64_t IndexAt(const TbeArgs& args, int64_t i) {
  return args.indices32 != nullptr ? args.indices32[i] : args.indices64[i];
}

int64_t OffsetAt(const TbeArgs& args, int64_t i) {
  return args.offsets32 != nullptr ? args.offsets32[i] : args.offsets64[i];
}

// Table t's occurrences, sorted by row (stably: index order within a row).
// Throws InvalidArgument (ThrowTbeFault) for a bad offset or index.
std::vector<Occurrence> GatherTable(const TbeArgs& args, int t) {
  const int64_t batch = args.batch_size;
  const int64_t num_bags = args.num_tables * batch;
  std::vector<Occurrence> occurrences;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t g = t * batch + b;
    const int64_t start = OffsetAt(args, g);
    const int64_t end = OffsetAt(args, g + 1);
    const TbeFault fault = CheckBagOffsets(t, b, g, num_bags, start, end, args.num_indices);
    if (fault.kind != TbeFaultKind::kNone) ThrowTbeFault(args, fault);
    const double bag_scale =
        args.mean && end > start ? 1.0 / static_cast<double>(end - start) : 1.0;
    for (int64_t i = start; i < end; ++i) {
      const int64_t index = IndexAt(args, i);
      if (!IndexInRange(index, args.rows[t])) {
        ThrowTbeFault(args, {.kind = TbeFaultKind::kIndexOutOfRange,
                             .table = t,
                             .bag = b,
                             .position = i,
                             .value = index,
                             .bound = args.rows[t]});
      }
      const double weight = args.per_sample_weights != nullptr ? args.per_sample_weights[i] : 1.0;
      occurrences.push_back({.row = index, .bag = b, .scale = weight * bag_scale, .position = i});
    }
  }
  std::stable_sort(occurrences.begin(), occurrences.end(),
                   [](const Occurrence& x, const Occurrence& y) { return x.row < y.row; });
  return occurrences;
}

// A row of any WeightType as f32 values: element `first` onwards of
// `base` (the weights, or the cache's slots).
class WeightRow {
 public:
  WeightRow(const TbeArgs& args, void* base, int64_t first)
      : args_(args), base_(base), first_(first) {}

  [[nodiscard]] float Load(int64_t c) const {
    switch (args_.weight_type) {
      case WeightType::kF16:
        return storage::HalfToFloat(static_cast<const uint16_t*>(base_)[first_ + c]);
      case WeightType::kBF16:
        return storage::Bf16ToFloat(static_cast<const uint16_t*>(base_)[first_ + c]);
      case WeightType::kF32:
        break;
    }
    return static_cast<const float*>(base_)[first_ + c];
  }

  void Store(int64_t c, float value) const {
    switch (args_.weight_type) {
      case WeightType::kF16:
        static_cast<uint16_t*>(base_)[first_ + c] = storage::FloatToHalf(value);
        return;
      case WeightType::kBF16:
        static_cast<uint16_t*>(base_)[first_ + c] = storage::FloatToBf16(value);
        return;
      case WeightType::kF32:
        break;
    }
    static_cast<float*>(base_)[first_ + c] = value;
  }

 private:
  const TbeArgs& args_;
  void* base_;
  int64_t first_;
};

// Where a distinct row's values are: its slot when the cache holds it (the
// location of any of its occurrences: they agree), else its home row. A
// slot about to be updated is flagged dirty where the cache keeps flags.
WeightRow RowToUpdate(const TbeArgs& args, int64_t home_first, int64_t position) {
  if (args.locations != nullptr && args.locations[position] >= 0) {
    const int64_t slot = args.locations[position];
    if (args.slot_dirty != nullptr) args.slot_dirty[slot] = 1;
    return WeightRow(args, args.slots, slot * args.slot_stride);
  }
  return WeightRow(args, args.weights, home_first);
}

// 1 - beta^step, as the CUDA kernel's host code computes it.
float BiasCorrection(float beta, int64_t step) {
  return static_cast<float>(1.0 - std::pow(static_cast<double>(beta), static_cast<double>(step)));
}

// Applies the optimizer to row `row` of table t with its gradient `g`; the
// row is updated where `position` (one of its occurrences) says it is, its
// optimizer state at home.
void ApplyOptimizer(const TbeArgs& args, int t, int64_t row, int64_t position,
                    const std::vector<float>& g) {
  const int64_t dim = args.dims[t];
  const int64_t first = args.weight_offsets[t] + row * dim;
  const WeightRow w = RowToUpdate(args, first, position);
  const float lr = args.learning_rate;
  switch (args.optimizer) {
    case OptimizerKind::kSgd:
      for (int64_t c = 0; c < dim; ++c) w.Store(c, w.Load(c) - lr * g[c]);
      return;
    case OptimizerKind::kRowwiseAdagrad: {
      double square_sum = 0.0;
      for (int64_t c = 0; c < dim; ++c) square_sum += static_cast<double>(g[c]) * g[c];
      float& a = args.accumulator[args.row_offsets[t] + row];
      a += static_cast<float>(square_sum / static_cast<double>(dim));
      const float denom = std::sqrt(a) + args.eps;
      for (int64_t c = 0; c < dim; ++c) w.Store(c, w.Load(c) - lr * g[c] / denom);
      return;
    }
    case OptimizerKind::kAdam: {
      const float b1 = args.beta1;
      const float b2 = args.beta2;
      const float correction1 = BiasCorrection(b1, args.step);
      const float correction2 = BiasCorrection(b2, args.step);
      for (int64_t c = 0; c < dim; ++c) {
        float& m = args.adam_m[first + c];
        float& v = args.adam_v[first + c];
        m = b1 * m + (1.0f - b1) * g[c];
        v = b2 * v + (1.0f - b2) * g[c] * g[c];
        const float m_hat = m / correction1;
        const float v_hat = v / correction2;
        const float weight = w.Load(c);
        w.Store(c,
                weight - lr * (m_hat / (std::sqrt(v_hat) + args.eps) + args.weight_decay * weight));
      }
      return;
    }
  }
}

// Reduces each distinct row of table t and applies the optimizer to it.
void UpdateTable(const TbeArgs& args, int t, const std::vector<Occurrence>& occurrences) {
  const int64_t dim = args.dims[t];
  std::vector<double> sum(dim);
  std::vector<float> g(dim);
  for (std::size_t s = 0; s < occurrences.size();) {
    const int64_t row = occurrences[s].row;
    std::fill(sum.begin(), sum.end(), 0.0);
    std::size_t e = s;
    for (; e < occurrences.size() && occurrences[e].row == row; ++e) {
      const float* grad =
          args.grad_output + occurrences[e].bag * args.total_dim + args.output_offsets[t];
      for (int64_t c = 0; c < dim; ++c) sum[c] += occurrences[e].scale * grad[c];
    }
    for (int64_t c = 0; c < dim; ++c) g[c] = static_cast<float>(sum[c]);
    ApplyOptimizer(args, t, row, occurrences[s].position, g);
    s = e;
  }
}

}  // namespace

void TbeBackwardCpu(const TbeArgs& args) {
  // Gather (and check) every table before touching any weight.
  std::vector<std::vector<Occurrence>> tables(args.num_tables);
  for (int t = 0; t < args.num_tables; ++t) tables[t] = GatherTable(args, t);
  for (int t = 0; t < args.num_tables; ++t) UpdateTable(args, t, tables[t]);
}

}  // namespace ember::ops::internal
