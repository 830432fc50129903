// TbeCachedRows on the CPU, every engine: rows read from and updated in
// cache slots give exactly what reading and updating them at home gives.

#include <string>

#include <gtest/gtest.h>

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

INSTANTIATE_TEST_SUITE_P(Engines, EmbeddingBagCachedRowsTest, ::testing::ValuesIn(EngineNames()));

}  // namespace
}  // namespace ember::ops::testing
