// EmbeddingBagForward on the CPU, for every engine type: against a
// double-precision reference on fresh random batches (odd dims, empty bags,
// sum and mean, per-sample weights, i32/i64 indices, f32/f16/bf16 weights),
// then every bad input: the argument checks at push time, and the batch
// checks of the kernel, whose error arrives through the output's wait.

#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
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

// Tolerances. f32 accumulation of bags of at most 12 entries in [-2, 2):
// the error stays below 12 * 2^-24 * 24 ~ 2e-5 absolute, so rtol 1e-5 plus
// atol 2e-5. f16/bf16 weights: the reference reads the same rounded values
// (embedding_bag_problem.h), so the same tolerances hold.
constexpr double kRtol = 1e-5;
constexpr double kAtol = 2e-5;

class EmbeddingBagForwardTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { engine_ = MakeEngine(GetParam()); }

  // The forward of `p` on the CPU; the op's error, if any, is rethrown.
  std::vector<float> Forward(const TbeProblem& p, DType index_dtype = DType::kI64,
                             Pooling pooling = Pooling::kSum) {
    return RunTbeForward(*engine_, p, Context::CPU(), index_dtype, {.pooling = pooling});
  }

  // The message of the InvalidArgument the forward of `p` fails with.
  std::string ForwardError(const TbeProblem& p, DType index_dtype = DType::kI64) {
    try {
      Forward(p, index_dtype);
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    ADD_FAILURE() << "no InvalidArgument";
    return {};
  }

  std::unique_ptr<engine::Engine> engine_;
};

TEST_P(EmbeddingBagForwardTest, MatchesDoubleReference) {
  std::mt19937_64 rng(2024);
  ForEachTbeForwardCase(
      rng, TbeShapes(),
      [&](const TbeProblem& p, DType index_dtype, Pooling pooling, const std::string& what) {
        ExpectClose(Forward(p, index_dtype, pooling), TbeReference(p, pooling == Pooling::kMean),
                    kRtol, kAtol, what);
      });
}

TEST_P(EmbeddingBagForwardTest, EmptyBagsGiveZeros) {
  std::mt19937_64 rng(3);
  const TbeProblem p = RandomTbeProblem(rng, {4, 6}, {5, 8}, 3, 0, false, DType::kF32);
  ASSERT_TRUE(p.indices.empty());
  for (Pooling pooling : {Pooling::kSum, Pooling::kMean}) {
    const std::vector<float> out = Forward(p, DType::kI32, pooling);
    EXPECT_EQ(out, std::vector<float>(out.size(), 0.0f));
  }
}

TEST_P(EmbeddingBagForwardTest, IndexOutOfRangeNamesTableBagAndValue) {
  TbeProblem p = SmallTbeProblem(7);
  p.indices[2 * 8 + 3 * 2 + 1] = 33;  // table 2, bag 3, second entry
  for (DType index_dtype : {DType::kI32, DType::kI64}) {
    const std::string message = ForwardError(p, index_dtype);
    EXPECT_THAT(message, HasSubstr("[EmbeddingBagForward] table 2, bag 3: "));
    EXPECT_THAT(message, HasSubstr("index 33 is out of range [0, 33) (indices[23])"));
  }
}

TEST_P(EmbeddingBagForwardTest, NegativeIndexNamesTableBagAndValue) {
  TbeProblem p = SmallTbeProblem(7);
  p.indices[1 * 8 + 0] = -4;  // table 1, bag 0
  EXPECT_THAT(ForwardError(p),
              HasSubstr("table 1, bag 0: index -4 is out of range [0, 50) (indices[8])"));
}

TEST_P(EmbeddingBagForwardTest, ReportsTheFirstBadBag) {
  TbeProblem p = SmallTbeProblem(7);
  p.indices[2 * 8 + 1] = 100;  // table 2, bag 0
  p.indices[1 * 8 + 5] = 60;   // table 1, bag 2: first in (table, bag) order
  EXPECT_THAT(ForwardError(p), HasSubstr("table 1, bag 2: index 60 is out of range [0, 50)"));
}

TEST_P(EmbeddingBagForwardTest, DecreasingOffsetsNameTableBagAndValue) {
  TbeProblem p = SmallTbeProblem(7);
  p.offsets[6] = 15;  // above offsets[7] = 14: bag 6 (table 1, bag 2) decreases
  const std::string message = ForwardError(p);
  EXPECT_THAT(message, HasSubstr("[EmbeddingBagForward] table 1, bag 2: "));
  EXPECT_THAT(message, HasSubstr("offsets[7] is 14, below offsets[6] = 15"));
}

TEST_P(EmbeddingBagForwardTest, FirstOffsetMustBeZero) {
  TbeProblem p = SmallTbeProblem(7);
  p.offsets[0] = 1;
  EXPECT_THAT(ForwardError(p, DType::kI32),
              HasSubstr("table 0, bag 0: offsets[0] is 1; the first offset must be 0"));
}

TEST_P(EmbeddingBagForwardTest, LastOffsetMustBeTheNumberOfIndices) {
  TbeProblem p = SmallTbeProblem(7);
  p.offsets.back() = 23;  // 24 indices
  EXPECT_THAT(ForwardError(p), HasSubstr("table 2, bag 3: offsets[12] is 23; the last offset "
                                         "must be the number of indices, 24"));
}

TEST_P(EmbeddingBagForwardTest, OffsetPastTheIndicesIsOutOfRange) {
  TbeProblem p = SmallTbeProblem(7);
  p.offsets[5] = 30;  // bag 4 (table 1, bag 0) ends past the 24 indices
  EXPECT_THAT(ForwardError(p), HasSubstr("table 1, bag 0: offsets[5] is 30, out of range [0, 24]"));
}

// Argument checks: thrown by the push function itself, naming the argument.
class EmbeddingBagForwardArgsTest : public EmbeddingBagForwardTest {
 protected:
  void SetUp() override {
    EmbeddingBagForwardTest::SetUp();
    problem_ = SmallTbeProblem(7);
    t_ = MakeTbeTensors(*engine_, problem_, Context::CPU(), DType::kI64);
  }

  // Expects InvalidArgument from the push, with every part in its message.
  void ExpectRejected(const std::function<void()>& push, const std::vector<std::string>& parts) {
    try {
      push();
      ADD_FAILURE() << "no InvalidArgument";
    } catch (const InvalidArgument& e) {
      for (const std::string& part : parts) EXPECT_THAT(e.what(), HasSubstr(part));
    }
  }

  Tensor Empty(std::vector<int64_t> shape, DType dtype) {
    return Tensor::Empty(*engine_, std::move(shape), dtype, Context::CPU());
  }

  void Push(const Tensor& weights, const TbeBatch& batch, Tensor& out) {
    EmbeddingBagForward(problem_.tables(), weights, batch, out);
  }

  TbeProblem problem_;
  TbeTensors t_;
};

TEST_P(EmbeddingBagForwardArgsTest, IndexDTypesMustBeIntegersAndEqual) {
  Tensor f32_indices = Empty({24}, DType::kF32);
  TbeBatch batch = t_.batch(4);
  batch.indices = &f32_indices;
  ExpectRejected([&] { Push(t_.weights, batch, t_.out); },
                 {"[EmbeddingBagForward] `batch.indices` is f32; expected i32 or i64"});
  Tensor i32_offsets = Empty({13}, DType::kI32);
  batch = t_.batch(4);
  batch.offsets = &i32_offsets;
  ExpectRejected([&] { Push(t_.weights, batch, t_.out); },
                 {"`batch.offsets` is i32; expected i64"});
}

TEST_P(EmbeddingBagForwardArgsTest, OffsetsNeedTBPlusOneEntries) {
  TbeBatch batch = t_.batch(5);  // 3 * 5 + 1 = 16 offsets expected, 13 given
  Tensor out = Empty({5, 15}, DType::kF32);
  ExpectRejected([&] { Push(t_.weights, batch, out); },
                 {"[EmbeddingBagForward] `batch.offsets` has shape [13]; expected [16]"});
}

TEST_P(EmbeddingBagForwardArgsTest, WeightsNeedAFloatTypeAndEveryElement) {
  Tensor i32_weights = Empty({problem_.tables().total_elements()}, DType::kI32);
  ExpectRejected([&] { Push(i32_weights, t_.batch(4), t_.out); },
                 {"`weights` is i32; expected f32 or f16 or bf16"});
  Tensor short_weights = Empty({10}, DType::kF32);
  ExpectRejected([&] { Push(short_weights, t_.batch(4), t_.out); },
                 {"`weights` has shape [10]; expected [" +
                  std::to_string(problem_.tables().total_elements()) + "]"});
}

TEST_P(EmbeddingBagForwardArgsTest, OutMustBeF32OfBatchByTotalDim) {
  Tensor wrong_shape = Empty({4, 14}, DType::kF32);
  ExpectRejected([&] { Push(t_.weights, t_.batch(4), wrong_shape); },
                 {"`out` has shape [4, 14]; expected [4, 15]"});
  Tensor wrong_dtype = Empty({4, 15}, DType::kF16);
  ExpectRejected([&] { Push(t_.weights, t_.batch(4), wrong_dtype); },
                 {"`out` is f16; expected f32"});
}

TEST_P(EmbeddingBagForwardArgsTest, PerSampleWeightsAreF32OnePerIndex) {
  Tensor too_few = Empty({23}, DType::kF32);
  TbeBatch batch = t_.batch(4);
  batch.per_sample_weights = &too_few;
  ExpectRejected([&] { Push(t_.weights, batch, t_.out); },
                 {"`batch.per_sample_weights` has shape [23]; expected [24]"});
  Tensor f16 = Empty({24}, DType::kF16);
  batch.per_sample_weights = &f16;
  ExpectRejected([&] { Push(t_.weights, batch, t_.out); },
                 {"`batch.per_sample_weights` is f16; expected f32"});
}

TEST_P(EmbeddingBagForwardArgsTest, BatchNeedsIndicesOffsetsAndASize) {
  TbeBatch batch = t_.batch(4);
  batch.indices = nullptr;
  ExpectRejected([&] { Push(t_.weights, batch, t_.out); }, {"`batch.indices` is null"});
  batch = t_.batch(-1);
  ExpectRejected([&] { Push(t_.weights, batch, t_.out); },
                 {"`batch.batch_size` is -1; it must not be negative"});
}

TEST_P(EmbeddingBagForwardArgsTest, TensorsMustShareOneEngine) {
  std::unique_ptr<engine::Engine> other = MakeEngine(GetParam());
  Tensor foreign_out = Tensor::Empty(*other, {4, 15}, DType::kF32, Context::CPU());
  ExpectRejected([&] { Push(t_.weights, t_.batch(4), foreign_out); },
                 {"[EmbeddingBagForward] the tensors belong to different engines"});
}

TEST(EmbeddingBagForwardTablesTest, RejectsMismatchedOrNonPositiveShapes) {
  EXPECT_THROW(TbeTables({10, 20}, {4}), InvalidArgument);
  EXPECT_THROW(TbeTables({}, {}), InvalidArgument);
  try {
    TbeTables({10, 0}, {4, 4});
    ADD_FAILURE() << "no InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("[TbeTables] table 1 has 0 rows of dim 4"));
  }
}

TEST(EmbeddingBagForwardTablesTest, PrefixSumsPlaceEachTable) {
  const TbeTables tables({10, 3, 7}, {4, 130, 1});
  EXPECT_EQ(tables.num_tables(), 3);
  EXPECT_EQ(tables.total_rows(), 20);
  EXPECT_EQ(tables.total_dim(), 135);
  EXPECT_EQ(tables.total_elements(), 40 + 390 + 7);
  EXPECT_EQ(tables.row_offset(2), 13);
  EXPECT_EQ(tables.weight_offset(2), 430);
  EXPECT_EQ(tables.output_offset(1), 4);
}

// TbeOptions::property reaches the engine, which dispatches the op to a
// pool by it; the engine's profile names it in each op's span category.
// The values do not change.
TEST(EmbeddingBagForwardPropertyTest, RunsOnThePoolItsPropertyNames) {
  const std::string path = ::testing::TempDir() + "ember_tbe_property_profile.json";
  std::remove(path.c_str());
  const TbeProblem p = SmallTbeProblem(5);
  std::vector<float> normal;
  std::vector<float> prioritized;
  {
    engine::EngineOptions options = engine::ParseEngineType("ThreadedEnginePerDevice");
    options.profile_path = path;
    auto engine = engine::CreateEngine(options);
    normal = RunTbeForward(*engine, p, Context::CPU(), DType::kI64, {});
    prioritized = RunTbeForward(*engine, p, Context::CPU(), DType::kI64,
                                {.property = engine::FnProperty::kCPUPrioritized});
    try {
      RunTbeForward(*engine, p, Context::CPU(), DType::kI64,
                    {.property = engine::FnProperty::kDeleteVar});
      ADD_FAILURE() << "no InvalidArgument";
    } catch (const InvalidArgument& e) {
      EXPECT_THAT(e.what(), HasSubstr("op 'EmbeddingBagForward': FnProperty::kDeleteVar"));
    }
  }  // the profile is written as the engine goes
  EXPECT_EQ(prioritized, normal);
  std::ifstream in(path);
  const std::string trace((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(trace, HasSubstr(R"("name":"EmbeddingBagForward","cat":"cpu/Normal")"));
  EXPECT_THAT(trace, HasSubstr(R"("name":"EmbeddingBagForward","cat":"cpu/CPUPrioritized")"));
}

INSTANTIATE_TEST_SUITE_P(Engines, EmbeddingBagForwardTest, ::testing::ValuesIn(EngineNames()));
INSTANTIATE_TEST_SUITE_P(Engines, EmbeddingBagForwardArgsTest, ::testing::ValuesIn(EngineNames()));

}  // namespace
}  // namespace ember::ops::testing
