// The TBE backward's CUDA kernel against its CPU twin (the reference of
// embedding_bag_backward_test.cc), on every engine type; skipped without a
// GPU.
//
// Tolerances. Gradients and per-sample weights here are small dyadic
// numbers (k / 256, k / 4), so that with sum pooling every partial sum is
// exact in f32 and the GPU's f32 sums equal the CPU's f64 sums: the
// weights then differ only by f32 rounding in the optimizer (nvcc fuses
// multiply-adds the CPU rounds twice): rtol 1e-5, atol 1e-6 after each
// step. Mean pooling scales by 1 / |bag|, which is not exact, so the sums
// differ by f32 rounding (there the gradients are uniform floats): atol
// 1e-5 (SGD moves a weight by lr * g, g summed over up to ~100 bags). f16/bf16 weights: two ulps of
// the storage type (a sum next to a rounding tie may round either way).

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/error.h"
#include "ops/elementwise.h"
#include "ops/embedding_bag.h"
#include "tests/ops/embedding_bag_backward_test_util.h"
#include "tests/ops/op_test_util.h"

namespace ember::ops::testing {
namespace {

using ::testing::HasSubstr;

const engine::Context kGpu = engine::Context::GPU(0);
const engine::Context kCpu = engine::Context::CPU();

// A batch whose first rows are Zipf-hot: row r of every table is drawn with
// probability ~ 1 / (r + 1), so rows 0..2 take a large share and span many
// of the GPU's chunks.
HostBatch ZipfBatch(std::mt19937_64& rng, const TbeTables& tables, int64_t batch_size,
                    int max_pooling) {
  HostBatch batch = RandomBatch(rng, tables, batch_size, max_pooling, /*weighted=*/true, 0.0);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int t = 0, i = 0; t < tables.num_tables(); ++t) {
    const int64_t end = batch.offsets[(t + 1) * batch_size];
    for (; i < end; ++i) {
      const double rows = static_cast<double>(tables.rows(t));
      batch.indices[i] = std::min<int64_t>(tables.rows(t) - 1,
                                           static_cast<int64_t>(std::pow(rows + 1, u(rng)) - 1));
    }
  }
  MakeWeightsDyadic(batch, rng);
  return batch;
}

// The state after `steps` steps (one batch each) on `ctx`, as host vectors.
struct Result {
  std::vector<float> weights{};
  std::vector<float> accumulator{};
  std::vector<float> m{};
  std::vector<float> v{};
};

struct Steps {
  const TbeTables* tables;
  Optimizer optimizer = Optimizer::kSgd;
  DType weight_dtype = DType::kF32;
  DType index_dtype = DType::kI64;
  TbeOptions options;
  std::vector<float> initial{};
  std::vector<HostBatch> batches{};
  std::vector<std::vector<float>> grads{};
};

Result RunOn(engine::Engine& engine, const Steps& run, engine::Context ctx) {
  const TbeTables& tables = *run.tables;
  TbeState state(engine, tables, run.optimizer, run.initial, run.weight_dtype, ctx);
  for (std::size_t s = 0; s < run.batches.size(); ++s) {
    const BatchTensors batch(engine, run.batches[s], ctx, run.index_dtype);
    const Tensor grad_output = FromHost(
        engine, run.grads[s], {run.batches[s].batch_size, tables.total_dim()}, ctx, DType::kF32);
    PushStep(run.optimizer, tables, state, batch.view(), grad_output, static_cast<int64_t>(s) + 1,
             run.options);
  }
  Result result{.weights = ToHost<float>(state.weights)};
  if (state.accumulator) result.accumulator = ToHost<float>(state.accumulator);
  if (state.m) result.m = ToHost<float>(state.m), result.v = ToHost<float>(state.v);
  return result;
}

std::vector<double> Widen(const std::vector<float>& values) {
  return {values.begin(), values.end()};
}

void ExpectResultsClose(const Result& gpu, const Result& cpu, double rtol, double atol,
                        const std::string& what) {
  ExpectClose(gpu.weights, Widen(cpu.weights), rtol, atol, what + " weights");
  ExpectClose(gpu.accumulator, Widen(cpu.accumulator), 1e-5, 1e-6, what + " accumulator");
  ExpectClose(gpu.m, Widen(cpu.m), 1e-5, 1e-6, what + " m");
  ExpectClose(gpu.v, Widen(cpu.v), 1e-5, 1e-6, what + " v");
}

class EmbeddingBagBackwardCudaTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  }

  // `steps` random batches (hot rows repeated) for `tables`.
  Steps RandomRun(const TbeTables& tables, Optimizer optimizer, int steps, Pooling pooling,
                  bool weighted, int64_t batch_size = 96, int max_pooling = 24) {
    Steps run{.tables = &tables, .optimizer = optimizer, .options = {.pooling = pooling}};
    run.initial = RandomFloats(rng_, tables.total_elements(), -0.5f, 0.5f);
    for (int s = 0; s < steps; ++s) {
      run.batches.push_back(RandomBatch(rng_, tables, batch_size, max_pooling, weighted));
      MakeWeightsDyadic(run.batches.back(), rng_);
      // Mean pooling's sums are inexact anyway; dyadic values there would
      // make exact cancellations (g = 0 on the CPU, an f32 residue on the
      // GPU) that Adam's g / (|g| + eps) blows up.
      const std::size_t n = batch_size * tables.total_dim();
      run.grads.push_back(pooling == Pooling::kSum ? DyadicGrads(rng_, n)
                                                   : RandomFloats(rng_, n, -1.0f, 1.0f));
    }
    return run;
  }

  std::mt19937_64 rng_{7771};
};

// Shapes that take each register layout: float4 rows (dims % 4 == 0) of up
// to 128, 256 and 1024 columns, and scalar rows (a dim % 4 != 0) of up to
// 512.
std::vector<TbeTables> Shapes() {
  return {TbeTables({300, 40, 9}, {128, 64, 32}), TbeTables({50, 200}, {256, 8}),
          TbeTables({60}, {1000}), TbeTables({100, 30, 70}, {5, 130, 300})};
}

TEST_P(EmbeddingBagBackwardCudaTest, MatchesCpuForEveryOptimizer) {
  auto engine = MakeEngine(GetParam());
  for (const TbeTables& tables : Shapes()) {
    for (Optimizer optimizer : {Optimizer::kSgd, Optimizer::kRowwiseAdagrad, Optimizer::kAdam}) {
      for (Pooling pooling : {Pooling::kSum, Pooling::kMean}) {
        const std::string what = OptimizerName(optimizer) + " dims " +
                                 std::to_string(tables.dim(0)) +
                                 (pooling == Pooling::kMean ? " mean" : " sum");
        Steps run = RandomRun(tables, optimizer, 2, pooling, pooling == Pooling::kSum);
        run.index_dtype = pooling == Pooling::kSum ? DType::kI64 : DType::kI32;
        const double atol = pooling == Pooling::kSum ? 1e-6 : 1e-5;
        ExpectResultsClose(RunOn(*engine, run, kGpu), RunOn(*engine, run, kCpu), 1e-5, atol, what);
      }
    }
  }
}

// The host plans one register shape, from the widest table, and launches
// it alone: every table of a TbeTables goes through it. Dims 4, 60, 128,
// 513 and 1024 in one TbeTables take the 1024-column shape with scalar rows
// (513 % 4 != 0), and with 512 for 513 float4 rows; alone, they take 1, 1,
// 1, 8 and 8 float4 a lane, and 200 and 500 take 2 and 4. A shape too
// narrow for a table would leave its last columns as they were, a wrong
// one read past a row.
TEST_P(EmbeddingBagBackwardCudaTest, EveryRegisterShapeMatchesCpu) {
  auto engine = MakeEngine(GetParam());
  std::vector<TbeTables> cases = {TbeTables({50, 40, 30, 20, 10}, {4, 60, 128, 513, 1024}),
                                  TbeTables({50, 40, 30, 20, 10}, {4, 60, 128, 512, 1024})};
  for (int64_t dim : {4, 60, 128, 200, 500, 513, 1024}) cases.push_back(TbeTables({40}, {dim}));
  for (const TbeTables& tables : cases) {
    for (Optimizer optimizer : {Optimizer::kSgd, Optimizer::kRowwiseAdagrad}) {
      std::string what = OptimizerName(optimizer) + " dims";
      for (int t = 0; t < tables.num_tables(); ++t) what += " " + std::to_string(tables.dim(t));
      const Steps run = RandomRun(tables, optimizer, 2, Pooling::kSum, true, 32, 8);
      ExpectResultsClose(RunOn(*engine, run, kGpu), RunOn(*engine, run, kCpu), 1e-5, 1e-6, what);
    }
  }
}

TEST_P(EmbeddingBagBackwardCudaTest, HalfWeightsMatchCpu) {
  auto engine = MakeEngine(GetParam());
  const TbeTables tables({300, 40}, {128, 12});
  for (DType weight_dtype : {DType::kF16, DType::kBF16}) {
    for (Optimizer optimizer : {Optimizer::kSgd, Optimizer::kRowwiseAdagrad, Optimizer::kAdam}) {
      Steps run = RandomRun(tables, optimizer, 2, Pooling::kSum, true);
      run.weight_dtype = weight_dtype;
      const double rtol = weight_dtype == DType::kF16 ? 2e-3 : 1.6e-2;
      ExpectResultsClose(RunOn(*engine, run, kGpu), RunOn(*engine, run, kCpu), rtol, 1e-4,
                         OptimizerName(optimizer) + " " + std::string(ToString(weight_dtype)));
    }
  }
}

// Zipf-hot rows: a few rows take a large share of a batch of ~80k indices,
// so their sums span hundreds of the GPU's chunks.
Steps ZipfRun(std::mt19937_64& rng, const TbeTables& tables, Optimizer optimizer,
              bool deterministic) {
  Steps run{.tables = &tables, .optimizer = optimizer, .options = {.deterministic = deterministic}};
  run.initial = RandomFloats(rng, tables.total_elements(), -0.5f, 0.5f);
  run.batches.push_back(ZipfBatch(rng, tables, 2048, 40));
  run.grads.push_back(DyadicGrads(rng, 2048 * tables.total_dim()));
  return run;
}

TEST_P(EmbeddingBagBackwardCudaTest, DeterministicIsBitIdenticalAcrossRuns) {
  auto engine = MakeEngine(GetParam());
  const TbeTables tables({5000, 64}, {128, 20});
  for (Optimizer optimizer : {Optimizer::kSgd, Optimizer::kRowwiseAdagrad, Optimizer::kAdam}) {
    Steps run = ZipfRun(rng_, tables, optimizer, /*deterministic=*/true);
    // Mean pooling: inexact sums, whose rounding depends on the order.
    run.options.pooling = Pooling::kMean;
    const Result first = RunOn(*engine, run, kGpu);
    const Result second = RunOn(*engine, run, kGpu);
    EXPECT_EQ(first.weights, second.weights) << OptimizerName(optimizer);
    EXPECT_EQ(first.accumulator, second.accumulator) << OptimizerName(optimizer);
    EXPECT_EQ(first.m, second.m) << OptimizerName(optimizer);
    EXPECT_EQ(first.v, second.v) << OptimizerName(optimizer);
  }
}

TEST_P(EmbeddingBagBackwardCudaTest, NonDeterministicIsCloseToCpuOnHotRows) {
  auto engine = MakeEngine(GetParam());
  const TbeTables tables({5000, 64}, {128, 20});
  for (Optimizer optimizer : {Optimizer::kSgd, Optimizer::kRowwiseAdagrad, Optimizer::kAdam}) {
    const Steps run = ZipfRun(rng_, tables, optimizer, /*deterministic=*/false);
    ExpectResultsClose(RunOn(*engine, run, kGpu), RunOn(*engine, run, kCpu), 1e-5, 1e-6,
                       OptimizerName(optimizer));
  }
}

// Without options.validate, bad entries are skipped: the result is the
// CPU's on the batch without them (sum pooling, where dropping an entry
// changes nothing else).
TEST_P(EmbeddingBagBackwardCudaTest, SkipsBadIndicesWithoutValidation) {
  auto engine = MakeEngine(GetParam());
  const TbeTables tables({100, 30}, {16, 8});
  Steps run = RandomRun(tables, Optimizer::kAdam, 1, Pooling::kSum, false, 32, 8);
  run.options.validate = false;
  Steps clean = run;
  HostBatch& bad = run.batches[0];
  std::uniform_int_distribution<std::size_t> pick(0, bad.indices.size() - 1);
  for (int i = 0; i < 10; ++i) bad.indices[pick(rng_)] = i % 2 == 0 ? 1000 : -3;
  HostBatch& kept = clean.batches[0];
  kept.indices.clear();
  kept.offsets = {0};
  for (std::size_t g = 0; g + 1 < bad.offsets.size(); ++g) {
    for (int64_t i = bad.offsets[g]; i < bad.offsets[g + 1]; ++i) {
      const int64_t rows = tables.rows(static_cast<int>(g / bad.batch_size));
      if (bad.indices[i] >= 0 && bad.indices[i] < rows) kept.indices.push_back(bad.indices[i]);
    }
    kept.offsets.push_back(static_cast<int64_t>(kept.indices.size()));
  }
  ExpectResultsClose(RunOn(*engine, run, kGpu), RunOn(*engine, clean, kCpu), 1e-5, 1e-6,
                     "bad entries skipped");
}

TEST_P(EmbeddingBagBackwardCudaTest, ValidationNamesTableBagAndValue) {
  auto engine = MakeEngine(GetParam());
  const TbeTables tables({100, 30}, {16, 8});
  Steps run = RandomRun(tables, Optimizer::kSgd, 1, Pooling::kSum, false, 32, 8);
  HostBatch& batch = run.batches[0];
  const int64_t position = batch.offsets[32 + 5];  // table 1, bag 5
  batch.indices.insert(batch.indices.begin() + position, 31);
  for (std::size_t g = 32 + 6; g < batch.offsets.size(); ++g) ++batch.offsets[g];
  std::string message;
  try {
    RunOn(*engine, run, kGpu);
  } catch (const InvalidArgument& e) {
    message = e.what();
  }
  EXPECT_THAT(message, HasSubstr("[EmbeddingBagBackwardSgd] table 1, bag 5: index 31 is out of "
                                 "range [0, 30)"));
}

// The CUDA backward holds a row's gradient in registers, up to 1024
// columns: a wider table is refused when the op is pushed (nothing runs),
// with the op, the table and its dim; a table of exactly 1024 columns runs
// and matches the CPU.
TEST_P(EmbeddingBagBackwardCudaTest, RefusesRowsWiderThan1024AtPush) {
  auto engine = MakeEngine(GetParam());
  const TbeTables wide({10, 4}, {16, 1025});
  for (Optimizer optimizer : {Optimizer::kSgd, Optimizer::kRowwiseAdagrad, Optimizer::kAdam}) {
    const Steps run = RandomRun(wide, optimizer, 1, Pooling::kSum, false, 4, 3);
    TbeState state(*engine, wide, optimizer, run.initial, DType::kF32, kGpu);
    const BatchTensors batch(*engine, run.batches[0], kGpu, DType::kI32);
    const Tensor grad_output =
        FromHost(*engine, run.grads[0], {4, wide.total_dim()}, kGpu, DType::kF32);
    std::string message;
    try {
      PushStep(optimizer, wide, state, batch.view(), grad_output, 1, run.options);
    } catch (const InvalidArgument& e) {
      message = e.what();
    }
    EXPECT_EQ(message, "[EmbeddingBagBackward" + OptimizerName(optimizer) +
                           "] table 1 has dim 1025; the CUDA backward takes dims up to 1024");
    engine->WaitForAll();
  }
  const TbeTables widest({10, 4}, {16, 1024});
  for (Optimizer optimizer : {Optimizer::kSgd, Optimizer::kRowwiseAdagrad, Optimizer::kAdam}) {
    const Steps run = RandomRun(widest, optimizer, 1, Pooling::kSum, true, 4, 3);
    ExpectResultsClose(RunOn(*engine, run, kGpu), RunOn(*engine, run, kCpu), 1e-5, 1e-6,
                       OptimizerName(optimizer) + " dim 1024");
  }
}

// A table of 2^32 rows (dim 1, f16: 8 GiB) is one row more than the CUDA
// backward can tell from its bad-entry key: refused at push, not skipped.
TEST_P(EmbeddingBagBackwardCudaTest, RefusesTablesOfMoreThan2To32MinusOneRowsAtPush) {
  constexpr int64_t kRows = int64_t{1} << 32;
  auto engine = MakeEngine(GetParam());
  const TbeTables huge({4, kRows}, {1, 1});
  Tensor weights;
  try {
    weights = Tensor::Empty(*engine, {huge.total_elements()}, DType::kF16, kGpu);
  } catch (const storage::OutOfMemory& e) {
    GTEST_SKIP() << "needs 8 GiB of device memory: " << e.what();
  }
  const HostBatch host{.indices = {0, kRows - 1}, .offsets = {0, 1, 2}, .batch_size = 1};
  const BatchTensors batch(*engine, host, kGpu, DType::kI64);
  const Tensor grad_output =
      FromHost(*engine, std::vector<float>{1.0f, 1.0f}, {1, 2}, kGpu, DType::kF32);
  std::string message;
  try {
    EmbeddingBagBackwardSgd(huge, weights, batch.view(), grad_output, {.learning_rate = 0.1f});
  } catch (const InvalidArgument& e) {
    message = e.what();
  }
  EXPECT_EQ(message,
            "[EmbeddingBagBackwardSgd] table 1 has 4294967296 rows; the CUDA backward takes up "
            "to 4294967295 rows a table");
  engine->WaitForAll();
}

INSTANTIATE_TEST_SUITE_P(Engines, EmbeddingBagBackwardCudaTest, ::testing::ValuesIn(EngineNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace ember::ops::testing
