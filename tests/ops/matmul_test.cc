// Matmul against a double-precision reference, on every engine type.
// Tolerance: inputs in [-1, 1], f32 products summed over K in f32, so the
// error is at most about K * 2^-24 * sum|a b| <= K^2 * 6e-8; we allow
// 1e-5 relative plus 2e-6 * K absolute, far above what BLAS reaches and far
// below a wrong element.

#include "ops/matmul.h"

#include <cmath>
#include <limits>
#include <vector>

#include "tests/ops/dense_test_util.h"

namespace ember::ops::testing {
namespace {

class MatmulTest : public DenseOpTest {
 protected:
  // C = alpha op(A) op(B) + beta C0 for row-major inputs, in double.
  static std::vector<double> Reference(const std::vector<float>& a, const std::vector<float>& b,
                                       const std::vector<float>& c0, int m, int n, int k, bool ta,
                                       bool tb, double alpha, double beta) {
    std::vector<double> c(static_cast<std::size_t>(m) * n);
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < n; ++j) {
        double sum = 0;
        for (int p = 0; p < k; ++p) {
          const double x = ta ? a[p * m + i] : a[i * k + p];
          const double y = tb ? b[j * k + p] : b[p * n + j];
          sum += x * y;
        }
        c[i * n + j] = alpha * sum + (beta == 0 ? 0.0 : beta * c0[i * n + j]);
      }
    }
    return c;
  }

  void CheckCase(int m, int n, int k, bool ta, bool tb, float alpha, float beta) {
    SCOPED_TRACE(::testing::Message() << "m=" << m << " n=" << n << " k=" << k << " ta=" << ta
                                      << " tb=" << tb << " alpha=" << alpha << " beta=" << beta);
    std::vector<float> a, b, c0;
    Tensor ta_tensor = Random(ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k}, &a);
    Tensor tb_tensor = Random(tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}, &b);
    Tensor c = Random({m, n}, &c0);
    Matmul(ta_tensor, tb_tensor, c, ta, tb, alpha, beta);
    ExpectClose(ToHost<float>(c), Reference(a, b, c0, m, n, k, ta, tb, alpha, beta), 1e-5,
                2e-6 * (k + 1), "c");
  }
};

TEST_P(MatmulTest, MatchesReferenceForEveryTranspose) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      CheckCase(7, 5, 13, ta, tb, 1.0f, 0.0f);
      CheckCase(33, 65, 48, ta, tb, 1.5f, 0.5f);
    }
  }
}

TEST_P(MatmulTest, LayerShapes) {
  CheckCase(128, 64, 256, false, true, 1.0f, 0.0f);   // y = x W^T
  CheckCase(128, 256, 64, false, false, 1.0f, 0.0f);  // dx = dy W
  CheckCase(64, 256, 128, true, false, 1.0f, 1.0f);   // dW += dy^T x
}

TEST_P(MatmulTest, BetaZeroDoesNotReadC) {
  std::vector<float> a, b;
  Tensor ta = Random({4, 3}, &a);
  Tensor tb = Random({3, 2}, &b);
  Tensor c = F32(std::vector<float>(8, std::numeric_limits<float>::quiet_NaN()), {4, 2});
  Matmul(ta, tb, c);
  ExpectClose(ToHost<float>(c), Reference(a, b, {}, 4, 2, 3, false, false, 1, 0), 1e-5, 1e-5, "c");
}

// TF32 is an allowance for the GPU: the CPU computes f32 either way, the
// same bits as without it.
TEST_P(MatmulTest, TensorFloat32LeavesTheCpuInFloat32) {
  std::vector<float> a, b;
  Tensor ta = Random({33, 70}, &a);
  Tensor tb = Random({70, 17}, &b);
  Tensor f32 = Empty({33, 17});
  Tensor tf32 = Empty({33, 17});
  Matmul(ta, tb, f32);
  Matmul(ta, tb, tf32, false, false, 1.0f, 0.0f, MatmulPrecision::kTensorFloat32);
  EXPECT_EQ(ToHost<float>(tf32), ToHost<float>(f32));
}

TEST_P(MatmulTest, EmptyDimensions) {
  Tensor a = Empty({3, 0});
  Tensor b = Empty({0, 2});
  Tensor c = F32({1, 2, 3, 4, 5, 6}, {3, 2});
  Matmul(a, b, c, false, false, 1.0f, 0.5f);  // K == 0: C = beta C
  EXPECT_EQ(ToHost<float>(c), (std::vector<float>{0.5f, 1, 1.5f, 2, 2.5f, 3}));
  Matmul(a, b, c);  // beta == 0: C = 0
  EXPECT_EQ(ToHost<float>(c), std::vector<float>(6, 0.0f));
  Tensor none = Empty({0, 2});
  Matmul(Empty({0, 4}), Empty({4, 2}), none);  // M == 0: nothing to do
  EXPECT_TRUE(ToHost<float>(none).empty());
}

TEST_P(MatmulTest, RejectsMismatchedShapes) {
  Tensor a = Empty({2, 5});
  Tensor b = Empty({3, 4});
  Tensor c = Empty({2, 4});
  ExpectInvalid([&] { Matmul(a, b, c); }, "[Matmul] `b` has shape [3, 4]; expected [5, 4]");
  ExpectInvalid([&] { Matmul(a, b, c, false, true); },
                "[Matmul] `b` has shape [3, 4]; expected [3, 5]");
  Tensor b2 = Empty({5, 4});
  Tensor c2 = Empty({4, 2});
  ExpectInvalid([&] { Matmul(a, b2, c2); }, "[Matmul] `c` has shape [4, 2]; expected [2, 4]");
  ExpectInvalid([&] { Matmul(a, b2, c, true); }, "[Matmul] `b` has shape [5, 4]; expected [2, 4]");
}

TEST_P(MatmulTest, RejectsBadTensors) {
  Tensor a = Empty({2, 2});
  Tensor c = Empty({2, 2});
  Tensor vector = Empty({4});
  Tensor ints = Tensor::Empty(*engine_, {2, 2}, DType::kI32, engine::Context::CPU());
  ExpectInvalid([&] { Matmul(vector, a, c); }, "[Matmul] `a` has shape [4]; expected 2 dimensions");
  ExpectInvalid([&] { Matmul(a, ints, c); }, "[Matmul] `b` is i32; expected f32");
  ExpectInvalid([&] { Matmul(a, Tensor(), c); }, "[Matmul] `b` is an empty tensor");
  ExpectInvalid([&] { Matmul(a, c, a); }, "[Matmul] `c` and `a` are one tensor");
  ExpectInvalid([&] { Matmul(c, a, a); }, "[Matmul] `c` and `b` are one tensor");
  auto other = MakeEngine(GetParam());
  Tensor foreign = Tensor::Empty(*other, {2, 2}, DType::kF32, engine::Context::CPU());
  ExpectInvalid([&] { Matmul(a, foreign, c); }, "[Matmul] the tensors belong to different engines");
}

INSTANTIATE_TEST_SUITE_P(Dense, MatmulTest, ::testing::ValuesIn(EngineNames()), EngineParamName);

}  // namespace
}  // namespace ember::ops::testing
