// ValidateTbeBatch, the host check of a batch made on the host
// (embedding_bag.h, "Validation"), on every engine type: it finds the entry
// the CPU kernels find and words it alike (under its own name), passes good
// batches, refuses what a push refuses, and reads the tensors at once, so
// that an op reading the batch may call it.

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
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
using ::testing::StartsWith;

constexpr char kForward[] = "[EmbeddingBagForward]";

class ValidateTbeBatchTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { engine_ = MakeEngine(GetParam()); }

  // The message of the InvalidArgument `call` throws ("" and a failure if none).
  template <typename Call>
  static std::string ErrorOf(Call call) {
    try {
      call();
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    ADD_FAILURE() << "no InvalidArgument";
    return {};
  }

  std::string ValidateError(const TbeProblem& p, DType index_dtype) {
    const TbeTensors t = MakeTbeTensors(*engine_, p, Context::CPU(), index_dtype);
    return ErrorOf([&] { ValidateTbeBatch(p.tables(), t.batch(p.batch_size)); });
  }

  std::string ForwardError(const TbeProblem& p, DType index_dtype) {
    return ErrorOf([&] { RunTbeForward(*engine_, p, Context::CPU(), index_dtype, {}); });
  }

  std::unique_ptr<engine::Engine> engine_;
};

TEST_P(ValidateTbeBatchTest, FindsTheKernelsFaultInTheirWords) {
  for (const BadBatch& bad : BadBatches()) {
    TbeProblem p = SmallTbeProblem(5);
    bad.corrupt(p);
    for (DType index_dtype : {DType::kI32, DType::kI64}) {
      const std::string kernel = ForwardError(p, index_dtype);
      ASSERT_THAT(kernel, StartsWith(kForward)) << bad.name;
      EXPECT_EQ(ValidateError(p, index_dtype),
                "[ValidateTbeBatch]" + kernel.substr(std::strlen(kForward)))
          << bad.name;
    }
  }
}

TEST_P(ValidateTbeBatchTest, NamesTableBagAndValue) {
  TbeProblem p = SmallTbeProblem(5);
  p.indices[23] = 33;
  EXPECT_EQ(ValidateError(p, DType::kI64),
            "[ValidateTbeBatch] table 2, bag 3: index 33 is out of range [0, 33) (indices[23])");
  p = SmallTbeProblem(5);
  p.offsets[12] = 23;
  EXPECT_EQ(ValidateError(p, DType::kI32),
            "[ValidateTbeBatch] table 2, bag 3: offsets[12] is 23; the last offset must be the "
            "number of indices, 24");
}

// Random batches with empty bags (the forward tests' shapes), a batch of no
// bags and one of no indices: all good.
TEST_P(ValidateTbeBatchTest, PassesGoodBatches) {
  std::mt19937_64 rng(31);
  std::vector<TbeProblem> problems;
  for (const TbeShape& shape : TbeShapes()) {
    problems.push_back(RandomTbeProblem(rng, shape.rows, shape.dims, shape.batch_size,
                                        shape.max_bag, true, DType::kF32));
  }
  problems.push_back(RandomTbeProblem(rng, {9, 4}, {2, 3}, 0, 3, false, DType::kF32));
  problems.push_back(RandomTbeProblem(rng, {9, 4}, {2, 3}, 5, 0, false, DType::kF32));
  for (const TbeProblem& p : problems) {
    for (DType index_dtype : {DType::kI32, DType::kI64}) {
      const TbeTensors t = MakeTbeTensors(*engine_, p, Context::CPU(), index_dtype);
      EXPECT_NO_THROW(ValidateTbeBatch(p.tables(), t.batch(p.batch_size)))
          << p.indices.size() << " indices in " << p.batch_size << " bags a table";
    }
  }
}

// A batch of no bags has no indices: they would belong to no bag and be
// dropped unread. (Its one offset is then never read, as no bag starts there.)
TEST_P(ValidateTbeBatchTest, NoBagsMeansNoIndices) {
  std::mt19937_64 rng(5);
  TbeProblem p = RandomTbeProblem(rng, {9, 4}, {2, 3}, 0, 3, false, DType::kF32);
  p.indices = {1, 2, 3};
  p.offsets = {3};
  for (DType index_dtype : {DType::kI32, DType::kI64}) {
    EXPECT_THAT(ValidateError(p, index_dtype), HasSubstr("the batch has no bags (batch_size 0, 2 "
                                                         "tables) but 3 indices"));
    EXPECT_THAT(ForwardError(p, index_dtype), HasSubstr("[EmbeddingBagForward] the batch has no"));
  }
}

// A good batch with one bad entry, wherever it is: an index one past its
// table's rows or negative, in every table's first, middle and last place;
// an offset below the one before it. The scan of a good batch is a fast
// pass without early exits; each of these must still be found and named.
TEST_P(ValidateTbeBatchTest, FindsOneBadEntryWhereverItIs) {
  std::mt19937_64 rng(7);
  const TbeProblem good = RandomTbeProblem(rng, {50, 7, 300}, {2, 3, 4}, 9, 4, false, DType::kF32);
  for (int t = 0; t < good.num_tables(); ++t) {
    const int64_t begin = good.offsets[t * good.batch_size];
    const int64_t end = good.offsets[(t + 1) * good.batch_size];
    ASSERT_LT(begin, end) << "table " << t << " has no indices to spoil";
    for (int64_t i : {begin, (begin + end) / 2, end - 1}) {
      for (int64_t value : {good.rows[t], int64_t{-1}}) {
        TbeProblem p = good;
        p.indices[i] = value;
        for (DType index_dtype : {DType::kI32, DType::kI64}) {
          const std::string error = ValidateError(p, index_dtype);
          EXPECT_THAT(error, HasSubstr(fmt::format("table {}, bag ", t)));
          EXPECT_THAT(error, HasSubstr(fmt::format("index {} is out of range [0, {}) (indices[{}])",
                                                   value, good.rows[t], i)));
        }
      }
    }
  }
  for (std::size_t g = 1; g + 1 < good.offsets.size(); ++g) {
    if (good.offsets[g] == 0) continue;
    TbeProblem p = good;
    p.offsets[g] = good.offsets[g - 1] - 1;
    if (p.offsets[g] < 0) continue;
    EXPECT_THAT(ValidateError(p, DType::kI64), HasSubstr("offsets must not decrease"))
        << "offsets[" << g << "]";
  }
}

TEST_P(ValidateTbeBatchTest, RefusesWhatAPushRefuses) {
  const TbeProblem p = SmallTbeProblem(5);
  const TbeTensors t = MakeTbeTensors(*engine_, p, Context::CPU(), DType::kI64);
  EXPECT_EQ(ErrorOf([&] { ValidateTbeBatch(p.tables(), t.batch(5)); }),
            "[ValidateTbeBatch] `batch.offsets` has shape [13]; expected [16]");
  TbeBatch no_indices = t.batch(4);
  no_indices.indices = nullptr;
  EXPECT_EQ(ErrorOf([&] { ValidateTbeBatch(p.tables(), no_indices); }),
            "[ValidateTbeBatch] `batch.indices` is null");
  const Tensor floats = Tensor::Empty(*engine_, {24}, DType::kF32, Context::CPU());
  TbeBatch float_indices = t.batch(4);
  float_indices.indices = &floats;
  EXPECT_THAT(ErrorOf([&] { ValidateTbeBatch(p.tables(), float_indices); }),
              HasSubstr("`batch.indices` is f32; expected i32 or i64"));
}

// It reads the tensors without the engine (no wait), so an op that reads
// the batch may validate it; a wait there would be refused.
TEST_P(ValidateTbeBatchTest, RunsInsideAnOpThatReadsTheBatch) {
  TbeProblem p = SmallTbeProblem(5);
  p.offsets[6] = 15;
  const TbeTensors t = MakeTbeTensors(*engine_, p, Context::CPU(), DType::kI64);
  const TbeTables tables = p.tables();
  const TbeBatch batch = t.batch(4);
  std::string message;
  const engine::VarHandle done = engine_->NewVariable();
  engine_->PushSync(
      [&](engine::RunContext) { message = ErrorOf([&] { ValidateTbeBatch(tables, batch); }); },
      {t.indices.var(), t.offsets.var()}, {done}, {.name = "validate"});
  engine_->WaitForVar(done);
  EXPECT_EQ(message,
            "[ValidateTbeBatch] table 1, bag 2: offsets[7] is 14, below offsets[6] = 15; "
            "offsets must not decrease");
  engine_->DeleteVariable(done);
}

INSTANTIATE_TEST_SUITE_P(Engines, ValidateTbeBatchTest, ::testing::ValuesIn(EngineNames()));

}  // namespace
}  // namespace ember::ops::testing
