// TbeCachedRows on the GPU: the CUDA forward and backward read and update
// cache slots exactly as they read and update home rows. Skipped without a
// CUDA device.

#include <string>

#include <gtest/gtest.h>

#include "tests/ops/embedding_bag_cached_rows.h"
#include "tests/ops/op_test_util.h"

namespace ember::ops::testing {
namespace {

class EmbeddingBagCachedRowsCudaTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_P(EmbeddingBagCachedRowsCudaTest, SlotsAndHomeRowsAgreeWithEveryOptimizer) {
  for (CachedOptimizer optimizer :
       {CachedOptimizer::kSgd, CachedOptimizer::kRowwiseAdagrad, CachedOptimizer::kAdam}) {
    for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
      SCOPED_TRACE(static_cast<int>(optimizer));
      CheckCachedRowsMatchHomeRows(GetParam(), engine::Context::GPU(0), dtype, optimizer, 23);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Engines, EmbeddingBagCachedRowsCudaTest,
                         ::testing::ValuesIn(EngineNames()));

}  // namespace
}  // namespace ember::ops::testing
