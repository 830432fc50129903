// EmbeddingBagForward on the GPU against its CPU twin on the same random
// batches, for every engine type: every variant of the CPU test, longer
// bags, the validation errors (word for word the CPU's), bad entries
// skipped without validation, and a bandwidth report at DLRM shapes. Skips
// without a GPU.

#include <chrono>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/error.h"
#include "ops/embedding_bag.h"
#include "tests/ops/embedding_bag_problem.h"
#include "tests/ops/op_test_util.h"

namespace ember::ops::testing {
namespace {

using engine::Context;
using ::testing::HasSubstr;

// GPU against CPU, both f32 accumulation in different orders (FMA, lane
// groups): rtol 1e-5, and atol 2e-5 for sums that cancel (bags of at most
// 100 entries of |w * v| < 2 stay far below it in practice).
constexpr double kRtol = 1e-5;
constexpr double kAtol = 2e-5;

struct Shape {
  std::vector<int64_t> rows;
  std::vector<int64_t> dims;
  int64_t batch_size;
  int max_bag;
};

// Scalar path (odd dims), vector path (multiples of 4), lane groups (dims
// under 128), chunks (over 128), and bags over 32 entries.
const std::vector<Shape>& Shapes() {
  static const std::vector<Shape> shapes = {
      {{7, 50, 33}, {3, 8, 130}, 9, 6},
      {{1000}, {128}, 16, 12},
      {{5, 9, 2, 40, 11}, {1, 4, 16, 64, 5}, 4, 3},
      {{3, 20}, {260, 32}, 5, 10},
      {{5000, 300, 64}, {128, 64, 36}, 40, 100},
  };
  return shapes;
}

std::vector<double> AsDouble(const std::vector<float>& values) {
  return {values.begin(), values.end()};
}

class EmbeddingBagForwardCudaTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
    engine_ = MakeEngine(GetParam());
  }

  std::vector<float> Forward(const TbeProblem& p, Context ctx, DType index_dtype,
                             const TbeOptions& options = {}) {
    return RunTbeForward(*engine_, p, ctx, index_dtype, options);
  }

  // The message of the InvalidArgument the forward of `p` on `ctx` fails with.
  std::string ForwardError(const TbeProblem& p, Context ctx, DType index_dtype) {
    try {
      Forward(p, ctx, index_dtype);
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    ADD_FAILURE() << "no InvalidArgument on " << ctx.ToString();
    return {};
  }

  std::unique_ptr<engine::Engine> engine_;
};

TEST_P(EmbeddingBagForwardCudaTest, MatchesCpuForward) {
  std::mt19937_64 rng(99);
  for (const Shape& shape : Shapes()) {
    for (DType weight_dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
      for (bool weighted : {false, true}) {
        const TbeProblem p = RandomTbeProblem(rng, shape.rows, shape.dims, shape.batch_size,
                                              shape.max_bag, weighted, weight_dtype);
        for (DType index_dtype : {DType::kI32, DType::kI64}) {
          for (bool mean : {false, true}) {
            const TbeOptions options = {.pooling = mean ? Pooling::kMean : Pooling::kSum};
            const std::string what = Describe(index_dtype, weight_dtype, mean, weighted) +
                                     ", dims " + ::testing::PrintToString(shape.dims);
            const std::vector<float> cpu = Forward(p, Context::CPU(), index_dtype, options);
            const std::vector<float> gpu = Forward(p, Context::GPU(0), index_dtype, options);
            ExpectClose(gpu, AsDouble(cpu), kRtol, kAtol, what);
          }
        }
      }
    }
  }
}

// Each case corrupts a valid batch of 3 tables x 4 bags of 2 entries.
struct BadBatch {
  const char* name;
  void (*corrupt)(TbeProblem& p);
};

const std::vector<BadBatch>& BadBatches() {
  static const std::vector<BadBatch> cases = {
      {"index too large", [](TbeProblem& p) { p.indices[23] = 33; }},
      {"negative index", [](TbeProblem& p) { p.indices[8] = -4; }},
      {"two bad bags", [](TbeProblem& p) { p.indices[17] = 100, p.indices[13] = 60; }},
      {"decreasing offsets", [](TbeProblem& p) { p.offsets[6] = 15; }},
      {"first offset", [](TbeProblem& p) { p.offsets[0] = 1; }},
      {"negative first offset", [](TbeProblem& p) { p.offsets[0] = -3; }},
      {"last offset", [](TbeProblem& p) { p.offsets[12] = 23; }},
      {"offset past the end", [](TbeProblem& p) { p.offsets[5] = 30; }},
      {"negative offset", [](TbeProblem& p) { p.offsets[3] = -1; }},
  };
  return cases;
}

TbeProblem SmallProblem() {
  std::mt19937_64 rng(5);
  TbeProblem p = RandomTbeProblem(rng, {7, 50, 33}, {3, 8, 4}, 4, 0, false, DType::kF32);
  p.indices.clear();
  p.offsets = {0};
  for (int t = 0; t < 3; ++t) {
    for (int b = 0; b < 4; ++b) {
      p.indices.push_back(b);
      p.indices.push_back(b + 1);
      p.offsets.push_back(static_cast<int64_t>(p.indices.size()));
    }
  }
  return p;
}

TEST_P(EmbeddingBagForwardCudaTest, ValidationErrorsAreTheCpuErrors) {
  for (const BadBatch& bad : BadBatches()) {
    TbeProblem p = SmallProblem();
    bad.corrupt(p);
    for (DType index_dtype : {DType::kI32, DType::kI64}) {
      const std::string cpu = ForwardError(p, Context::CPU(), index_dtype);
      const std::string gpu = ForwardError(p, Context::GPU(0), index_dtype);
      EXPECT_THAT(cpu, HasSubstr("[EmbeddingBagForward] table ")) << bad.name;
      EXPECT_EQ(gpu, cpu) << bad.name;
    }
  }
}

TEST_P(EmbeddingBagForwardCudaTest, SpotChecksOfTheGpuWording) {
  TbeProblem p = SmallProblem();
  p.indices[23] = 33;
  EXPECT_THAT(ForwardError(p, Context::GPU(0), DType::kI64),
              HasSubstr("[EmbeddingBagForward] table 2, bag 3: index 33 is out of range [0, 33) "
                        "(indices[23])"));
  p = SmallProblem();
  p.offsets[6] = 15;
  EXPECT_THAT(ForwardError(p, Context::GPU(0), DType::kI32),
              HasSubstr("table 1, bag 2: offsets[7] is 14, below offsets[6] = 15"));
}

// Without validation, bad indices are skipped: a sum bag holding one is the
// sum of its good rows, and every other bag is exact.
TEST_P(EmbeddingBagForwardCudaTest, WithoutValidationBadIndicesAreSkipped) {
  std::mt19937_64 rng(11);
  TbeProblem p = RandomTbeProblem(rng, {100, 70}, {128, 5}, 8, 9, false, DType::kF32);
  p.per_sample_weights.assign(p.indices.size(), 1.0f);
  TbeProblem bad = p;
  bad.per_sample_weights.clear();
  const std::vector<std::size_t> positions = {0, p.indices.size() / 2, p.indices.size() - 1};
  const std::vector<int64_t> values = {1000, -1, int64_t{1} << 40};
  for (std::size_t k = 0; k < positions.size(); ++k) {
    bad.indices[positions[k]] = values[k];
    p.per_sample_weights[positions[k]] = 0.0f;  // the reference skips it
  }
  const std::vector<double> expected = TbeReference(p, false);
  // i64 only: 2^40 does not fit i32 (-1 and 1000 do, and take the same path).
  const std::vector<float> gpu =
      Forward(bad, Context::GPU(0), DType::kI64, {.pooling = Pooling::kSum, .validate = false});
  ExpectClose(gpu, expected, kRtol, kAtol, "validate=false with bad indices");
}

TEST_P(EmbeddingBagForwardCudaTest, WithoutValidationBadOffsetsDoNotFault) {
  TbeProblem p = SmallProblem();
  p.offsets[5] = 1000;   // past the end
  p.offsets[9] = -1000;  // negative
  const std::vector<float> out =
      Forward(p, Context::GPU(0), DType::kI64, {.pooling = Pooling::kMean, .validate = false});
  EXPECT_EQ(out.size(), 4u * 15u);
  // Table 0 reads only good offsets: its bags are exact.
  TbeProblem good = SmallProblem();
  const std::vector<float> cpu =
      Forward(good, Context::CPU(), DType::kI64, {.pooling = Pooling::kMean});
  for (int b = 0; b < 4; ++b) {
    for (int d = 0; d < 3; ++d) EXPECT_FLOAT_EQ(out[b * 15 + d], cpu[b * 15 + d]) << b;
  }
}

TEST_P(EmbeddingBagForwardCudaTest, TensorsMustShareOneContext) {
  const TbeProblem p = SmallProblem();
  TbeTensors gpu = MakeTbeTensors(*engine_, p, Context::GPU(0), DType::kI64);
  TbeTensors cpu = MakeTbeTensors(*engine_, p, Context::CPU(), DType::kI64);
  try {
    EmbeddingBagForward(p.tables(), gpu.weights, cpu.batch(4), gpu.out);
    ADD_FAILURE() << "no InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("[EmbeddingBagForward] the tensors are on gpu(0) and cpu"));
  }
}

INSTANTIATE_TEST_SUITE_P(Engines, EmbeddingBagForwardCudaTest, ::testing::ValuesIn(EngineNames()));

// ---- Bandwidth report -----------------------------------------------------

// Zipf-like indices (P(k) ~ 1/k, log-uniform), scattered over the table by
// an odd multiplier (a bijection modulo the power-of-two row count).
std::vector<int64_t> ZipfIndices(std::mt19937_64& rng, std::size_t n, int64_t rows) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<int64_t> indices(n);
  for (int64_t& index : indices) {
    const auto k = static_cast<int64_t>(std::pow(static_cast<double>(rows), u(rng))) - 1;
    index = (k * 2654435761LL) & (rows - 1);
  }
  return indices;
}

// Seconds per forward, from a timed run of `reps` after a warm-up.
double TimeForward(const TbeTables& tables, TbeTensors& t, int64_t batch_size, int reps) {
  EmbeddingBagForward(tables, t.weights, t.batch(batch_size), t.out, {.validate = false});
  t.out.WaitToRead();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) {
    EmbeddingBagForward(tables, t.weights, t.batch(batch_size), t.out, {.validate = false});
  }
  t.out.WaitToRead();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / reps;
}

// Prints GB/s (rows read + indices + output written) for 128-dim f32 tables
// of 2^20 rows, beside a device-to-device copy (read + write) as the
// bandwidth the GPU reaches at best. A report: it asserts nothing on speed.
TEST(EmbeddingBagForwardCudaPerf, ReportsBandwidthAtDlrmShapes) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  std::unique_ptr<engine::Engine> engine = MakeEngine("ThreadedEnginePerDeviceAsync");
  constexpr int64_t kRows = int64_t{1} << 20;
  constexpr int64_t kDim = 128;
  const Context gpu = Context::GPU(0);

  Tensor src = Tensor::Empty(*engine, {int64_t{1} << 28}, DType::kF32, gpu);  // 1 GiB
  Tensor dst = Tensor::Empty(*engine, {int64_t{1} << 28}, DType::kF32, gpu);
  src.CopyTo(dst);
  dst.WaitToRead();
  const auto copy_start = std::chrono::steady_clock::now();
  for (int i = 0; i < 5; ++i) src.CopyTo(dst);
  dst.WaitToRead();
  const double copy_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - copy_start).count() / 5;
  const double copy_gbs = 2.0 * static_cast<double>(src.bytes()) / copy_s / 1e9;
  std::cout << "device-to-device copy: " << copy_gbs << " GB/s (read + write)\n";

  struct Case {
    int tables;
    int64_t batch_size;
    int pooling;
    bool zipf;
  };
  std::mt19937_64 rng(1);
  for (const Case& c : {Case{8, 16384, 20, false}, Case{8, 16384, 20, true},
                        Case{16, 32768, 40, true}, Case{8, 65536, 80, false}}) {
    const TbeTables tables(std::vector<int64_t>(c.tables, kRows),
                           std::vector<int64_t>(c.tables, kDim));
    const int64_t bags = c.tables * c.batch_size;
    const auto n = static_cast<std::size_t>(bags * c.pooling);
    std::vector<int64_t> indices;
    if (c.zipf) {
      indices = ZipfIndices(rng, n, kRows);
    } else {
      std::uniform_int_distribution<int64_t> row(0, kRows - 1);
      indices.resize(n);
      for (int64_t& index : indices) index = row(rng);
    }
    std::vector<int64_t> offsets(static_cast<std::size_t>(bags) + 1);
    for (int64_t g = 0; g <= bags; ++g) offsets[g] = g * c.pooling;
    TbeTensors t;
    t.weights = Tensor::Empty(*engine, {tables.total_elements()}, DType::kF32, gpu);
    t.indices = FromHost(*engine, indices, {static_cast<int64_t>(n)}, gpu, DType::kI64);
    t.offsets = FromHost(*engine, offsets, {bags + 1}, gpu, DType::kI64);
    t.out = Tensor::Empty(*engine, {c.batch_size, tables.total_dim()}, DType::kF32, gpu);
    const double seconds = TimeForward(tables, t, c.batch_size, 10);
    const double bytes =
        static_cast<double>(n) * (kDim * 4 + 8) + static_cast<double>(bags) * (kDim * 4 + 8);
    std::cout << "T=" << c.tables << " B=" << c.batch_size << " L=" << c.pooling << " dim=" << kDim
              << (c.zipf ? " zipf" : " uniform") << ": " << seconds * 1e3 << " ms, "
              << bytes / seconds / 1e9 << " GB/s, " << 100.0 * bytes / seconds / 1e9 / copy_gbs
              << "% of the copy\n";
  }
}

}  // namespace
}  // namespace ember::ops::testing
