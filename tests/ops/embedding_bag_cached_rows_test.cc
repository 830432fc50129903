// TbeCachedRows on the CPU, every engine: rows read from and updated in
// cache slots give exactly what reading and updating them at home gives.

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/error.h"
#include "ops/embedding_bag.h"
#include "tests/ops/embedding_bag_cached_rows.h"
#include "tests/ops/op_test_util.h"

namespace ember::ops::testing {
namespace {

class EmbeddingBagCachedRowsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(EmbeddingBagCachedRowsTest, SlotsAndHomeRowsAgreeWithEveryOptimizer) {
  for (CachedOptimizer optimizer :
       {CachedOptimizer::kSgd, CachedOptimizer::kRowwiseAdagrad, CachedOptimizer::kAdam}) {
    for (DType dtype : {DType::kF32, DType::kF16}) {
      SCOPED_TRACE(static_cast<int>(optimizer));
      CheckCachedRowsMatchHomeRows(GetParam(), engine::Context::CPU(), dtype, optimizer, 11);
    }
  }
}

// Dirty flags that are not i32, or fewer than the slots, are refused at the
// push, naming the argument.
TEST_P(EmbeddingBagCachedRowsTest, DirtyFlagsOfTheWrongTypeOrTooFewAreRefused) {
  auto engine = MakeEngine(GetParam());
  const engine::Context cpu = engine::Context::CPU();
  const TbeTables tables({10}, {4});
  Tensor weights = FromHost(*engine, std::vector<float>(40, 0.0f), {40}, cpu, DType::kF32);
  Tensor indices = FromHost(*engine, std::vector<int64_t>{1, 2}, {2}, cpu, DType::kI64);
  Tensor offsets = FromHost(*engine, std::vector<int64_t>{0, 2}, {2}, cpu, DType::kI64);
  Tensor grad = FromHost(*engine, std::vector<float>(4, 1.0f), {1, 4}, cpu, DType::kF32);
  Tensor locations = FromHost(*engine, std::vector<int32_t>{0, -1}, {2}, cpu, DType::kI32);
  Tensor slots = FromHost(*engine, std::vector<float>(12, 0.0f), {3, 4}, cpu, DType::kF32);
  Tensor as_i64 = FromHost(*engine, std::vector<int64_t>(3, 0), {3}, cpu, DType::kI64);
  Tensor too_few = FromHost(*engine, std::vector<int32_t>(2, 0), {2}, cpu, DType::kI32);
  const TbeBatch batch{&indices, &offsets, nullptr, 1};
  const TbeCachedRows wrong_type{&locations, &slots, nullptr, &as_i64};
  EXPECT_THAT([&] { EmbeddingBagBackwardSgd(tables, weights, batch, grad, {}, {}, &wrong_type); },
              ::testing::ThrowsMessage<InvalidArgument>(::testing::HasSubstr("cached->dirty")));
  const TbeCachedRows short_flags{&locations, &slots, nullptr, &too_few};
  EXPECT_THAT([&] { EmbeddingBagBackwardSgd(tables, weights, batch, grad, {}, {}, &short_flags); },
              ::testing::ThrowsMessage<InvalidArgument>(
                  ::testing::HasSubstr("`cached->dirty` has 2 flags for 3 slots")));
  engine->WaitForAll();
}

INSTANTIATE_TEST_SUITE_P(Engines, EmbeddingBagCachedRowsTest, ::testing::ValuesIn(EngineNames()));

}  // namespace
}  // namespace ember::ops::testing
