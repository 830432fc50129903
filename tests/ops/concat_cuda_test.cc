// ConcatColumns, SplitColumns and SliceRows on the GPU against the CPU kernels on the
// same inputs, on every engine type: a pure copy, so bit for bit. Skips on
// a machine without a CUDA device.

#include <vector>

#include "ops/concat.h"
#include "tests/ops/dense_test_util.h"

namespace ember::ops::testing {
namespace {

constexpr engine::Context kGpu = engine::Context::GPU(0);

class ConcatCudaTest : public DenseOpTest {
 protected:
  void SetUp() override {
    if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
    DenseOpTest::SetUp();
  }
};

TEST_P(ConcatCudaTest, MatchesTheCpuBitForBit) {
  // DLRM-like: B = 300, D = 64, 26 tables; then the top MLP's input.
  const int64_t batch = 300, dim = 64, tables = 26;
  const int64_t pairs = (tables + 1) * tables / 2;
  std::vector<float> dense, pooled, inter;
  Tensor a = Random({batch, dim}, &dense);
  Tensor b = Random({batch, tables * dim}, &pooled);
  Tensor c = Random({batch, pairs}, &inter);
  Tensor a_gpu = F32(dense, {batch, dim}, kGpu);
  Tensor b_gpu = F32(pooled, {batch, tables * dim}, kGpu);
  Tensor c_gpu = F32(inter, {batch, pairs}, kGpu);

  Tensor x = Empty({batch, tables + 1, dim});
  Tensor x_gpu = Empty({batch, tables + 1, dim}, kGpu);
  ConcatColumns({&a, &b}, x);
  ConcatColumns({&a_gpu, &b_gpu}, x_gpu);
  EXPECT_EQ(ToHost<float>(x_gpu), ToHost<float>(x));

  Tensor top = Empty({batch, dim + pairs});
  Tensor top_gpu = Empty({batch, dim + pairs}, kGpu);
  ConcatColumns({&a, &c}, top);
  ConcatColumns({&a_gpu, &c_gpu}, top_gpu);
  EXPECT_EQ(ToHost<float>(top_gpu), ToHost<float>(top));

  // Three parts of unequal widths, the widest last, and back.
  const std::vector<int64_t> three_shape = {batch, dim + pairs + tables * dim};
  Tensor three = Empty(three_shape);
  Tensor three_gpu = Empty(three_shape, kGpu);
  ConcatColumns({&a, &c, &b}, three);
  ConcatColumns({&a_gpu, &c_gpu, &b_gpu}, three_gpu);
  EXPECT_EQ(ToHost<float>(three_gpu), ToHost<float>(three));
  Tensor c_back = Empty({batch, pairs}, kGpu);
  Tensor b_back = Empty({batch, tables * dim}, kGpu);
  Tensor a_back = Empty({batch, dim}, kGpu);
  SplitColumns(three_gpu, {&a_back, &c_back, &b_back});
  EXPECT_EQ(ToHost<float>(a_back), dense);
  EXPECT_EQ(ToHost<float>(c_back), inter);
  EXPECT_EQ(ToHost<float>(b_back), pooled);

  Tensor d_gpu = Empty({batch, dim}, kGpu);
  Tensor p_gpu = Empty({batch, tables * dim}, kGpu);
  SplitColumns(x_gpu, {&d_gpu, &p_gpu});
  EXPECT_EQ(ToHost<float>(d_gpu), dense);
  EXPECT_EQ(ToHost<float>(p_gpu), pooled);

  // The second of three data-parallel slices of the batch.
  Tensor slice_gpu = Empty({batch / 3, tables * dim}, kGpu);
  SliceRows(b_gpu, batch / 3, slice_gpu);
  EXPECT_EQ(ToHost<float>(slice_gpu),
            std::vector<float>(pooled.begin() + batch / 3 * tables * dim,
                               pooled.begin() + 2 * batch / 3 * tables * dim));
}

TEST_P(ConcatCudaTest, RejectsTensorsOnTwoContexts) {
  Tensor a = Empty({4, 2});
  Tensor b = Empty({4, 2}, kGpu);
  Tensor out = Empty({4, 4}, kGpu);
  ExpectInvalid(
      [&] {
        ConcatColumns({&a, &b}, out);
      },
      "[ConcatColumns] the tensors are on gpu(0) and cpu; an op runs on one");
}

INSTANTIATE_TEST_SUITE_P(Dense, ConcatCudaTest, ::testing::ValuesIn(EngineNames()),
                         EngineParamName);

}  // namespace
}  // namespace ember::ops::testing
