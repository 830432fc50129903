// DotInteraction and its backward against double-precision references, on
// every engine type. Tolerance: inputs in [-1, 1]; a dot product of D f32
// products summed in f32 is off by at most about D * 2^-24 * sum|x y|, so
// 1e-5 relative plus 1e-6 * D absolute; the backward sums F - 1 such terms.

#include "ops/interaction.h"

#include <vector>

#include "tests/ops/dense_test_util.h"

namespace ember::ops::testing {
namespace {

class InteractionTest : public DenseOpTest {
 protected:
  // Z[b, (i, j)] for i > j, ordered (1,0) (2,0) (2,1) (3,0) ...
  static std::vector<double> Forward(const std::vector<float>& x, int batch, int f, int d) {
    std::vector<double> z;
    for (int b = 0; b < batch; ++b) {
      for (int i = 0; i < f; ++i) {
        for (int j = 0; j < i; ++j) {
          double dot = 0;
          for (int e = 0; e < d; ++e)
            dot += double{x[(b * f + i) * d + e]} * x[(b * f + j) * d + e];
          z.push_back(dot);
        }
      }
    }
    return z;
  }

  // dL/dx[b, k] = sum over the pairs (i, j) that hold k of dZ times the
  // other vector of the pair.
  static std::vector<double> Backward(const std::vector<float>& x, const std::vector<float>& dz,
                                      int batch, int f, int d) {
    std::vector<double> dx(x.size(), 0.0);
    std::size_t p = 0;
    for (int b = 0; b < batch; ++b) {
      for (int i = 0; i < f; ++i) {
        for (int j = 0; j < i; ++j, ++p) {
          for (int e = 0; e < d; ++e) {
            dx[(b * f + i) * d + e] += double{dz[p]} * x[(b * f + j) * d + e];
            dx[(b * f + j) * d + e] += double{dz[p]} * x[(b * f + i) * d + e];
          }
        }
      }
    }
    return dx;
  }

  void CheckCase(int batch, int f, int d) {
    SCOPED_TRACE(::testing::Message() << "B=" << batch << " F=" << f << " D=" << d);
    const int pairs = f * (f - 1) / 2;
    std::vector<float> x, dz;
    Tensor input = Random({batch, f, d}, &x);
    Tensor output = Empty({batch, pairs});
    DotInteraction(input, output);
    ExpectClose(ToHost<float>(output), Forward(x, batch, f, d), 1e-5, 1e-6 * d, "output");
    Tensor grad_output = Random({batch, pairs}, &dz);
    Tensor grad_input = Empty({batch, f, d});
    DotInteractionBackward(input, grad_output, grad_input);
    ExpectClose(ToHost<float>(grad_input), Backward(x, dz, batch, f, d), 1e-5, 1e-6 * d * f,
                "grad_input");
  }
};

TEST_P(InteractionTest, MatchesReference) {
  CheckCase(5, 6, 7);
  CheckCase(3, 27, 70);  // DLRM-like: 26 embeddings and the dense vector
  CheckCase(2, 2, 1);
}

TEST_P(InteractionTest, PairsAreInDlrmOrder) {
  // Features e0, e1, 2 e0 + e1: pairs (1,0) (2,0) (2,1) give 0, 2, 1.
  Tensor input = F32({1, 0, 0, 1, 2, 1}, {1, 3, 2});
  Tensor output = Empty({1, 3});
  DotInteraction(input, output);
  EXPECT_EQ(ToHost<float>(output), (std::vector<float>{0, 2, 1}));
}

TEST_P(InteractionTest, OneFeatureHasNoPairs) {
  Tensor input = F32({1, 2, 3, 4}, {2, 1, 2});
  Tensor output = Empty({2, 0});
  DotInteraction(input, output);
  Tensor grad_input = F32({9, 9, 9, 9}, {2, 1, 2});
  DotInteractionBackward(input, output, grad_input);
  EXPECT_EQ(ToHost<float>(grad_input), std::vector<float>(4, 0.0f));
}

TEST_P(InteractionTest, RejectsBadArguments) {
  Tensor input = Empty({4, 3, 8});
  Tensor output = Empty({4, 3});
  Tensor flat = Empty({4, 24});
  ExpectInvalid([&] { DotInteraction(flat, output); },
                "[DotInteraction] `input` has shape [4, 24]; expected 3 dimensions");
  Tensor wrong = Empty({4, 6});
  ExpectInvalid([&] { DotInteraction(input, wrong); },
                "[DotInteraction] `output` has shape [4, 6]; expected [4, 3]");
  Tensor grad_input = Empty({4, 3, 8});
  ExpectInvalid([&] { DotInteractionBackward(input, wrong, grad_input); },
                "[DotInteractionBackward] `grad_output` has shape [4, 6]; expected [4, 3]");
  ExpectInvalid([&] { DotInteractionBackward(input, output, flat); },
                "[DotInteractionBackward] `grad_input` has shape [4, 24]; expected [4, 3, 8]");
  ExpectInvalid([&] { DotInteractionBackward(input, output, input); },
                "[DotInteractionBackward] `grad_input` and `input` are one tensor");
  Tensor ints = Tensor::Empty(*engine_, {4, 3}, DType::kI64, engine::Context::CPU());
  ExpectInvalid([&] { DotInteraction(input, ints); },
                "[DotInteraction] `output` is i64; expected f32");
}

INSTANTIATE_TEST_SUITE_P(Dense, InteractionTest, ::testing::ValuesIn(EngineNames()),
                         EngineParamName);

}  // namespace
}  // namespace ember::ops::testing
