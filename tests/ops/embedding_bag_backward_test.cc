// The TBE backward on the CPU (embedding_bag.h, "Backward") against a
// double-precision reference written here from the header's definitions,
// on fresh random batches with rows repeated within and across bags, on
// every engine type; and the bad batches, whose errors name table, bag and
// value.
//
// Tolerances (|actual - expected| <= atol + rtol |expected|):
//  - f32 weights and all optimizer state: rtol 1e-5, atol 1e-6. The kernel
//    sums gradients in f64 and runs the optimizer in f32: a few f32 ulps.
//  - f16 weights: rtol 2e-3, atol 1e-5; bf16: rtol 1.6e-2, atol 1e-4, two
//    ulps of the storage type. The reference rounds its weights to the
//    storage type after each step as the kernel does, but an f32 result
//    next to a rounding tie may round the other way.

#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/error.h"
#include "ops/embedding_bag.h"
#include "storage/half.h"
#include "tests/ops/embedding_bag_backward_test_util.h"
#include "tests/ops/op_test_util.h"

namespace ember::ops::testing {
namespace {

using ::testing::HasSubstr;

// g_r of every distinct (table, row) of the batch, from the definition.
using Gradients = std::map<std::pair<int, int64_t>, std::vector<double>>;

Gradients ReferenceGradients(const TbeTables& tables, const HostBatch& batch,
                             const std::vector<float>& grad_output, Pooling pooling) {
  Gradients gradients;
  const int64_t batch_size = batch.batch_size;
  for (int t = 0; t < tables.num_tables(); ++t) {
    for (int64_t b = 0; b < batch_size; ++b) {
      const int64_t start = batch.offsets[t * batch_size + b];
      const int64_t end = batch.offsets[t * batch_size + b + 1];
      const double s = pooling == Pooling::kMean ? 1.0 / static_cast<double>(end - start) : 1.0;
      for (int64_t i = start; i < end; ++i) {
        const double w = batch.per_sample_weights.empty() ? 1.0 : batch.per_sample_weights[i];
        std::vector<double>& g = gradients[{t, batch.indices[i]}];
        g.resize(tables.dim(t));
        for (int64_t c = 0; c < tables.dim(t); ++c) {
          g[c] += w * s * grad_output[b * tables.total_dim() + tables.output_offset(t) + c];
        }
      }
    }
  }
  return gradients;
}

// The weights as stored in `dtype`, back in f64.
double Stored(double value, DType dtype) {
  const auto f = static_cast<float>(value);
  if (dtype == DType::kF16) return storage::HalfToFloat(storage::FloatToHalf(f));
  if (dtype == DType::kBF16) return storage::Bf16ToFloat(storage::FloatToBf16(f));
  return value;
}

// The reference's weights and optimizer state, in f64.
struct Reference {
  Reference(const TbeTables& tables, const std::vector<float>& initial, DType dtype)
      : dtype(dtype),
        weights(initial.begin(), initial.end()),
        accumulator(tables.total_rows()),
        m(tables.total_elements()),
        v(tables.total_elements()) {
    for (double& w : weights) w = Stored(w, dtype);
  }

  // One step of `optimizer` (the Test* options) with `gradients`.
  void Step(const TbeTables& tables, Optimizer optimizer, const Gradients& gradients,
            int64_t step) {
    for (const auto& [key, g] : gradients) {
      const auto [t, row] = key;
      const int64_t first = tables.weight_offset(t) + row * tables.dim(t);
      const auto dim = static_cast<int64_t>(g.size());
      switch (optimizer) {
        case Optimizer::kSgd:
          for (int64_t c = 0; c < dim; ++c) weights[first + c] -= TestSgd().learning_rate * g[c];
          break;
        case Optimizer::kRowwiseAdagrad: {
          double square_sum = 0.0;
          for (double x : g) square_sum += x * x;
          double& a = accumulator[tables.row_offset(t) + row];
          a += square_sum / static_cast<double>(dim);
          const RowwiseAdagradOptions o = TestAdagrad();
          for (int64_t c = 0; c < dim; ++c) {
            weights[first + c] -= o.learning_rate * g[c] / (std::sqrt(a) + o.eps);
          }
          break;
        }
        case Optimizer::kAdam: {
          const AdamOptions o = TestAdam();
          const double b1 = o.beta1;
          const double b2 = o.beta2;
          for (int64_t c = 0; c < dim; ++c) {
            const int64_t e = first + c;
            m[e] = b1 * m[e] + (1 - b1) * g[c];
            v[e] = b2 * v[e] + (1 - b2) * g[c] * g[c];
            const double m_hat = m[e] / (1 - std::pow(b1, step));
            const double v_hat = v[e] / (1 - std::pow(b2, step));
            weights[e] -= o.learning_rate *
                          (m_hat / (std::sqrt(v_hat) + o.eps) + o.weight_decay * weights[e]);
          }
          break;
        }
      }
      for (int64_t c = 0; c < dim; ++c) weights[first + c] = Stored(weights[first + c], dtype);
    }
  }

  DType dtype;
  std::vector<double> weights;
  std::vector<double> accumulator;
  std::vector<double> m;
  std::vector<double> v;
};

// One configuration of a reference comparison.
struct Case {
  Optimizer optimizer = Optimizer::kSgd;
  Pooling pooling = Pooling::kSum;
  bool weighted = false;
  DType index_dtype = DType::kI64;
  DType weight_dtype = DType::kF32;
  int steps = 1;
  std::vector<int64_t> rows = {50, 7, 120};
  std::vector<int64_t> dims = {8, 5, 16};
};

std::string Describe(const Case& c) {
  return OptimizerName(c.optimizer) + (c.pooling == Pooling::kMean ? " mean" : " sum") +
         (c.weighted ? " weighted" : "") + " indices " +
         std::string(storage::ToString(c.index_dtype)) + " weights " +
         std::string(storage::ToString(c.weight_dtype));
}

class EmbeddingBagBackwardTest : public ::testing::TestWithParam<std::string> {
 protected:
  // Runs `c.steps` steps, each on a fresh batch, against the reference.
  void ExpectMatchesReference(const Case& c) {
    SCOPED_TRACE(Describe(c));
    auto engine = MakeEngine(GetParam());
    const TbeTables tables(c.rows, c.dims);
    const std::vector<float> initial = RandomFloats(rng_, tables.total_elements(), -0.5f, 0.5f);
    Reference reference(tables, initial, c.weight_dtype);
    TbeState state(*engine, tables, c.optimizer, initial, c.weight_dtype, engine::Context::CPU());
    for (int step = 1; step <= c.steps; ++step) {
      const HostBatch host = RandomBatch(rng_, tables, 16, 6, c.weighted);
      const BatchTensors batch(*engine, host, engine::Context::CPU(), c.index_dtype);
      const std::vector<float> grad = RandomFloats(rng_, 16 * tables.total_dim(), -1.0f, 1.0f);
      const Tensor grad_output =
          FromHost(*engine, grad, {16, tables.total_dim()}, engine::Context::CPU(), DType::kF32);
      PushStep(c.optimizer, tables, state, batch.view(), grad_output, step, {.pooling = c.pooling});
      reference.Step(tables, c.optimizer, ReferenceGradients(tables, host, grad, c.pooling), step);
      ExpectState(c, state, reference, "step " + std::to_string(step));
    }
  }

  static void ExpectState(const Case& c, const TbeState& state, const Reference& reference,
                          const std::string& what) {
    const double rtol = c.weight_dtype == DType::kF16    ? 2e-3
                        : c.weight_dtype == DType::kBF16 ? 1.6e-2
                                                         : 1e-5;
    const double atol = c.weight_dtype == DType::kF16    ? 1e-5
                        : c.weight_dtype == DType::kBF16 ? 1e-4
                                                         : 1e-6;
    ExpectClose(ToHost<float>(state.weights), reference.weights, rtol, atol, what + " weights");
    if (state.accumulator) {
      ExpectClose(ToHost<float>(state.accumulator), reference.accumulator, 1e-5, 1e-6,
                  what + " accumulator");
    }
    if (state.m) {
      ExpectClose(ToHost<float>(state.m), reference.m, 1e-5, 1e-6, what + " m");
      ExpectClose(ToHost<float>(state.v), reference.v, 1e-5, 1e-6, what + " v");
    }
  }

  std::mt19937_64 rng_{20240611};
};

TEST_P(EmbeddingBagBackwardTest, SgdMatchesReference) {
  for (Pooling pooling : {Pooling::kSum, Pooling::kMean}) {
    for (bool weighted : {false, true}) {
      for (DType index_dtype : {DType::kI32, DType::kI64}) {
        ExpectMatchesReference({.optimizer = Optimizer::kSgd,
                                .pooling = pooling,
                                .weighted = weighted,
                                .index_dtype = index_dtype});
      }
    }
  }
}

TEST_P(EmbeddingBagBackwardTest, RowwiseAdagradAccumulatesOverSteps) {
  ExpectMatchesReference({.optimizer = Optimizer::kRowwiseAdagrad, .steps = 3});
  ExpectMatchesReference({.optimizer = Optimizer::kRowwiseAdagrad,
                          .pooling = Pooling::kMean,
                          .weighted = true,
                          .index_dtype = DType::kI32,
                          .steps = 3});
}

TEST_P(EmbeddingBagBackwardTest, AdamMatchesReferenceAtSteps1To3) {
  ExpectMatchesReference({.optimizer = Optimizer::kAdam, .steps = 3});
  ExpectMatchesReference({.optimizer = Optimizer::kAdam,
                          .pooling = Pooling::kMean,
                          .weighted = true,
                          .index_dtype = DType::kI32,
                          .steps = 3});
}

TEST_P(EmbeddingBagBackwardTest, HalfWeightsRoundToNearestEven) {
  for (DType weight_dtype : {DType::kF16, DType::kBF16}) {
    ExpectMatchesReference({.optimizer = Optimizer::kSgd, .weight_dtype = weight_dtype});
    ExpectMatchesReference({.optimizer = Optimizer::kRowwiseAdagrad,
                            .pooling = Pooling::kMean,
                            .weight_dtype = weight_dtype,
                            .steps = 2});
    ExpectMatchesReference({.optimizer = Optimizer::kAdam,
                            .weighted = true,
                            .weight_dtype = weight_dtype,
                            .steps = 3});
  }
}

// The CUDA backward stops at dim 1024 (embedding_bag.h); the CPU's does
// not.
TEST_P(EmbeddingBagBackwardTest, CpuTakesRowsWiderThanTheCudaLimit) {
  for (Optimizer optimizer : {Optimizer::kSgd, Optimizer::kRowwiseAdagrad, Optimizer::kAdam}) {
    ExpectMatchesReference({.optimizer = optimizer, .rows = {9, 20}, .dims = {1100, 8}});
  }
}

TEST_P(EmbeddingBagBackwardTest, EmptyBagsChangeNothing) {
  auto engine = MakeEngine(GetParam());
  const TbeTables tables({4, 3}, {4, 2});
  const std::vector<float> initial = RandomFloats(rng_, tables.total_elements(), -1.0f, 1.0f);
  TbeState state(*engine, tables, Optimizer::kAdam, initial, DType::kF32, engine::Context::CPU());
  HostBatch host{
      .indices = {}, .offsets = {0, 0, 0, 0, 0}, .per_sample_weights = {}, .batch_size = 2};
  const BatchTensors batch(*engine, host, engine::Context::CPU(), DType::kI64);
  const Tensor grad_output = FromHost(*engine, std::vector<float>(2 * tables.total_dim(), 1.0f),
                                      {2, tables.total_dim()}, engine::Context::CPU(), DType::kF32);
  PushStep(Optimizer::kAdam, tables, state, batch.view(), grad_output, 1, {});
  EXPECT_EQ(ToHost<float>(state.weights), initial);
  EXPECT_EQ(ToHost<float>(state.m), std::vector<float>(tables.total_elements()));
}

// The message of the InvalidArgument that a step on `host` raises (at the
// push or at the wait), or "" when none does. The weights must come back
// untouched: the CPU kernel checks the whole batch before updating.
std::string StepError(const std::string& engine_name, const HostBatch& host) {
  auto engine = MakeEngine(engine_name);
  const TbeTables tables({10, 1000, 6}, {4, 4, 4});
  const std::vector<float> initial(tables.total_elements(), 0.25f);
  TbeState state(*engine, tables, Optimizer::kSgd, initial, DType::kF32, engine::Context::CPU());
  const BatchTensors batch(*engine, host, engine::Context::CPU(), DType::kI64);
  const Tensor grad_output = FromHost(*engine, std::vector<float>(host.batch_size * 12, 1.0f),
                                      {host.batch_size, 12}, engine::Context::CPU(), DType::kF32);
  std::string message;
  try {
    PushStep(Optimizer::kSgd, tables, state, batch.view(), grad_output, 1, {});
    state.weights.WaitToRead();
  } catch (const InvalidArgument& e) {
    message = e.what();
  }
  EXPECT_EQ(ToHost<float>(state.weights), initial) << "a bad batch must leave the weights";
  return message;
}

// Three tables, batch size 4: offsets has 13 entries.
HostBatch ThreeTableBatch() {
  HostBatch host;
  host.batch_size = 4;
  host.offsets = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  host.indices = {0, 1, 2, 3, 10, 20, 30, 40, 0, 1, 2, 3};
  return host;
}

TEST_P(EmbeddingBagBackwardTest, OutOfRangeIndexNamesTableBagAndValue) {
  HostBatch host = ThreeTableBatch();
  host.indices[6] = 1000;  // table 1, bag 2
  EXPECT_THAT(StepError(GetParam(), host),
              HasSubstr("[EmbeddingBagBackwardSgd] table 1, bag 2: index 1000 is out of range "
                        "[0, 1000)"));
  host = ThreeTableBatch();
  host.indices[11] = -1;  // table 2, bag 3
  EXPECT_THAT(StepError(GetParam(), host),
              HasSubstr("table 2, bag 3: index -1 is out of range [0, 6)"));
}

TEST_P(EmbeddingBagBackwardTest, DecreasingOffsetsNameTableAndBag) {
  HostBatch host = ThreeTableBatch();
  host.offsets[6] = 4;  // bag 1 of table 1 ends (offsets[6]) below its start 5
  EXPECT_THAT(StepError(GetParam(), host), HasSubstr("table 1, bag 1: offsets[6] is 4"));
}

TEST_P(EmbeddingBagBackwardTest, OffsetPastTheIndicesIsRejected) {
  HostBatch host = ThreeTableBatch();
  host.offsets[3] = 40;  // ends bag 2 of table 0
  EXPECT_THAT(StepError(GetParam(), host), HasSubstr("table 0, bag 2: offsets[3] is 40"));
}

TEST_P(EmbeddingBagBackwardTest, OffsetsMustStartAtZeroAndEndAtTheIndexCount) {
  HostBatch host = ThreeTableBatch();
  host.offsets[0] = 1;
  EXPECT_THAT(StepError(GetParam(), host), HasSubstr("table 0, bag 0: offsets[0] is 1"));
  host = ThreeTableBatch();
  host.offsets[12] = 11;
  EXPECT_THAT(StepError(GetParam(), host), HasSubstr("table 2, bag 3: offsets[12] is 11"));
}

INSTANTIATE_TEST_SUITE_P(Engines, EmbeddingBagBackwardTest, ::testing::ValuesIn(EngineNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace ember::ops::testing
