// EmbeddingBagForward on the GPU against its CPU twin on the same random
// batches, for every engine type: every variant of the CPU test, longer
// bags, the validation errors (word for word the CPU's), bad entries
// skipped without validation, and a bandwidth report at DLRM shapes. Skips
// without a GPU.

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

// The forward tests' shapes and one with bags over 32 entries.
std::vector<TbeShape> Shapes() {
  std::vector<TbeShape> shapes = TbeShapes();
  shapes.push_back({{5000, 300, 64}, {128, 64, 36}, 40, 100});
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
  ForEachTbeForwardCase(
      rng, Shapes(),
      [&](const TbeProblem& p, DType index_dtype, Pooling pooling, const std::string& what) {
        const TbeOptions options = {.pooling = pooling};
        const std::vector<float> cpu = Forward(p, Context::CPU(), index_dtype, options);
        const std::vector<float> gpu = Forward(p, Context::GPU(0), index_dtype, options);
        ExpectClose(gpu, AsDouble(cpu), kRtol, kAtol, what);
      });
}

TEST_P(EmbeddingBagForwardCudaTest, ValidationErrorsAreTheCpuErrors) {
  for (const BadBatch& bad : BadBatches()) {
    TbeProblem p = SmallTbeProblem(5);
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
  TbeProblem p = SmallTbeProblem(5);
  p.indices[23] = 33;
  EXPECT_THAT(ForwardError(p, Context::GPU(0), DType::kI64),
              HasSubstr("[EmbeddingBagForward] table 2, bag 3: index 33 is out of range [0, 33) "
                        "(indices[23])"));
  p = SmallTbeProblem(5);
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
  TbeProblem p = SmallTbeProblem(5);
  p.offsets[5] = 1000;   // past the end
  p.offsets[9] = -1000;  // negative
  const std::vector<float> out =
      Forward(p, Context::GPU(0), DType::kI64, {.pooling = Pooling::kMean, .validate = false});
  EXPECT_EQ(out.size(), 4u * 15u);
  // Table 0 reads only good offsets: its bags are exact.
  TbeProblem good = SmallTbeProblem(5);
  const std::vector<float> cpu =
      Forward(good, Context::CPU(), DType::kI64, {.pooling = Pooling::kMean});
  for (int b = 0; b < 4; ++b) {
    for (int d = 0; d < 3; ++d) EXPECT_FLOAT_EQ(out[b * 15 + d], cpu[b * 15 + d]) << b;
  }
}

TEST_P(EmbeddingBagForwardCudaTest, TensorsMustShareOneContext) {
  const TbeProblem p = SmallTbeProblem(5);
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

}  // namespace
}  // namespace ember::ops::testing
