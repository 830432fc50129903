// SigmoidBinaryCrossEntropy and Sigmoid against double-precision
// references, on every engine type. Tolerance: each term is a few f32
// operations (expf and log1pf within 1-2 ulp), the mean is summed in double:
// 1e-5 relative on the loss, plus 1e-7 absolute; 1e-5 relative on each
// gradient, which is computed without cancellation (plus 1e-40 absolute for
// the f32 subnormals of logits beyond +-87).

#include "ops/loss.h"

#include <cmath>
#include <vector>

#include "tests/ops/dense_test_util.h"

namespace ember::ops::testing {
namespace {

class LossTest : public DenseOpTest {
 protected:
  // The textbook form, in double: fine for the logits tested here.
  static double RefSigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
  static double Bce(double x, double y) {
    return std::max(x, 0.0) - x * y + std::log1p(std::exp(-std::abs(x)));
  }

  // Labels: 0 or 1 at random.
  std::vector<float> Labels(std::size_t n) {
    std::vector<float> labels(n);
    for (float& label : labels) label = static_cast<float>(rng_() & 1);
    return labels;
  }

  void CheckCase(const std::vector<float>& x, const std::vector<float>& y,
                 std::vector<int64_t> shape) {
    Tensor logits = F32(x, shape);
    Tensor labels = F32(y, shape);
    Tensor loss = Empty({1});
    Tensor grad = Empty(shape);
    SigmoidBinaryCrossEntropy(logits, labels, loss, grad);
    const double n = static_cast<double>(x.size());
    double mean = 0;
    std::vector<double> expected_grad(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      mean += Bce(x[i], y[i]) / n;
      // s(x) - y as s(x) (1 - y) - s(-x) y: no cancellation in the reference either.
      expected_grad[i] = (RefSigmoid(x[i]) * (1 - y[i]) - RefSigmoid(-x[i]) * y[i]) / n;
    }
    ExpectClose(ToHost<float>(loss), {mean}, 1e-5, 1e-7, "loss");
    ExpectClose(ToHost<float>(grad), expected_grad, 1e-5, 1e-40, "grad_logits");
  }
};

TEST_P(LossTest, MatchesReference) {
  std::vector<float> x = RandomFloats(rng_, 4097, -10.0f, 10.0f);
  CheckCase(x, Labels(x.size()), {4097});
  x = RandomFloats(rng_, 64, -3.0f, 3.0f);
  CheckCase(x, Labels(x.size()), {64, 1});  // DLRM's [N, 1] logits
}

TEST_P(LossTest, ExtremeLogitsStayFinite) {
  const std::vector<float> x = {100.0f, -100.0f, 1e4f, -1e4f, 0.0f, 30.0f};
  const std::vector<float> y = {0.0f, 1.0f, 1.0f, 0.0f, 1.0f, 0.0f};
  CheckCase(x, y, {6});
  // A confident wrong logit costs its size, not inf.
  Tensor logits = F32({1e4f}, {1});
  Tensor labels = F32({0.0f}, {1});
  Tensor loss = Empty({1});
  Tensor grad = Empty({1});
  SigmoidBinaryCrossEntropy(logits, labels, loss, grad);
  EXPECT_EQ(ToHost<float>(loss), std::vector<float>{1e4f});
  EXPECT_EQ(ToHost<float>(grad), std::vector<float>{1.0f});
}

// A data-parallel rank's part of a batch, divided by the whole batch's
// size: the parts' gradients are the whole's bit for bit, their losses sum
// to the whole's.
TEST_P(LossTest, PartsOfABatchMeanOverTheWhole) {
  const std::vector<float> x = RandomFloats(rng_, 96, -6.0f, 6.0f);
  const std::vector<float> y = Labels(x.size());
  Tensor loss = Empty({1});
  Tensor grad = Empty({96});
  SigmoidBinaryCrossEntropy(F32(x, {96}), F32(y, {96}), loss, grad);
  const std::vector<float> whole = ToHost<float>(grad);
  double loss_sum = 0;
  for (int part = 0; part < 3; ++part) {
    const auto begin = x.begin() + 32 * part;
    const auto label_begin = y.begin() + 32 * part;
    Tensor part_loss = Empty({1});
    Tensor part_grad = Empty({32, 1});
    SigmoidBinaryCrossEntropy(F32({begin, begin + 32}, {32, 1}),
                              F32({label_begin, label_begin + 32}, {32, 1}), part_loss, part_grad,
                              /*mean_over=*/96);
    const std::vector<float> g = ToHost<float>(part_grad);
    EXPECT_EQ(g, std::vector<float>(whole.begin() + 32 * part, whole.begin() + 32 * (part + 1)))
        << "part " << part;
    loss_sum += ToHost<float>(part_loss)[0];
  }
  ExpectClose({static_cast<float>(loss_sum)}, {ToHost<float>(loss)[0]}, 1e-6, 1e-7, "loss");
}

TEST_P(LossTest, SigmoidMatchesReference) {
  std::vector<float> x = RandomFloats(rng_, 1000, -20.0f, 20.0f);
  x.push_back(-100.0f);
  x.push_back(100.0f);
  Tensor logits = F32(x, {static_cast<int64_t>(x.size())});
  Tensor probs = Empty({static_cast<int64_t>(x.size())});
  Sigmoid(logits, probs);
  std::vector<double> expected(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) expected[i] = RefSigmoid(x[i]);
  ExpectClose(ToHost<float>(probs), expected, 1e-6, 1e-30, "probs");
  Sigmoid(logits, logits);  // in place
  ExpectClose(ToHost<float>(logits), expected, 1e-6, 1e-30, "probs in place");
}

TEST_P(LossTest, RejectsBadArguments) {
  Tensor logits = Empty({8});
  Tensor labels = Empty({8});
  Tensor loss = Empty({1});
  Tensor grad = Empty({8});
  constexpr char kOp[] = "[SigmoidBinaryCrossEntropy] ";
  Tensor short_labels = Empty({7});
  ExpectInvalid([&] { SigmoidBinaryCrossEntropy(logits, short_labels, loss, grad); },
                std::string(kOp) + "`labels` has shape [7]; expected [8]");
  Tensor column = Empty({8, 1});
  ExpectInvalid([&] { SigmoidBinaryCrossEntropy(logits, labels, loss, column); },
                std::string(kOp) + "`grad_logits` has shape [8, 1]; expected [8]");
  Tensor two = Empty({2});
  ExpectInvalid([&] { SigmoidBinaryCrossEntropy(logits, labels, two, grad); },
                std::string(kOp) + "`loss` has 2 elements (shape [2]); expected 1");
  ExpectInvalid([&] { SigmoidBinaryCrossEntropy(logits, labels, loss, logits); },
                std::string(kOp) + "`grad_logits` and `logits` are one tensor");
  Tensor none = Empty({0});
  Tensor none_grad = Empty({0});
  ExpectInvalid([&] { SigmoidBinaryCrossEntropy(none, none, loss, none_grad); },
                std::string(kOp) + "`logits` has shape [0]; the mean of no losses");
  ExpectInvalid([&] { SigmoidBinaryCrossEntropy(logits, labels, loss, grad, 7); },
                std::string(kOp) +
                    "`mean_over` is 7: the mean of 8 logits is over at least as "
                    "many (0: over them)");
  Tensor ints = Tensor::Empty(*engine_, {8}, DType::kI32, engine::Context::CPU());
  ExpectInvalid([&] { SigmoidBinaryCrossEntropy(logits, ints, loss, grad); },
                std::string(kOp) + "`labels` is i32; expected f32");
  ExpectInvalid([&] { Sigmoid(logits, column); },
                "[Sigmoid] `probs` has shape [8, 1]; expected [8]");
}

INSTANTIATE_TEST_SUITE_P(Dense, LossTest, ::testing::ValuesIn(EngineNames()), EngineParamName);

}  // namespace
}  // namespace ember::ops::testing
