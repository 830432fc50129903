// The dense optimizers against double-precision references over several
// steps, on every engine type. Tolerance: a step is a handful of f32
// operations per element (rounding 2^-24 each, Adam's division by
// sqrt(v) + eps amplifying it by at most a few), over 5 steps: 2e-5
// relative plus 1e-6 absolute on parameters and states.

#include "ops/optimizer.h"

#include <cmath>
#include <vector>

#include "tests/ops/dense_test_util.h"

namespace ember::ops::testing {
namespace {

constexpr int kSteps = 5;
constexpr int kSize = 1000;

class OptimizerTest : public DenseOpTest {
 protected:
  std::vector<double> ToDouble(const std::vector<float>& v) { return {v.begin(), v.end()}; }

  // Fresh gradients per step, shared by the op and the reference.
  std::vector<std::vector<float>> Grads() {
    std::vector<std::vector<float>> grads;
    for (int s = 0; s < kSteps; ++s) grads.push_back(RandomFloats(rng_, kSize, -1.0f, 1.0f));
    return grads;
  }
};

TEST_P(OptimizerTest, SgdWithAndWithoutMomentum) {
  for (float momentum : {0.0f, 0.9f}) {
    SCOPED_TRACE(::testing::Message() << "momentum " << momentum);
    const DenseSgdOptions options{
        .learning_rate = 0.1f, .momentum = momentum, .weight_decay = 0.01f};
    std::vector<float> p0;
    Tensor param = Random({kSize}, &p0);
    Tensor buffer = F32(std::vector<float>(kSize, 0.0f), {kSize});
    std::vector<double> p = ToDouble(p0), buf(kSize, 0.0);
    for (const std::vector<float>& g : Grads()) {
      Tensor grad = F32(g, {kSize});
      SgdUpdate(param, grad, options, momentum != 0 ? &buffer : nullptr);
      for (int i = 0; i < kSize; ++i) {
        double d = g[i] + 0.01 * p[i];
        if (momentum != 0) d = buf[i] = momentum * buf[i] + d;
        p[i] -= 0.1 * d;
      }
    }
    ExpectClose(ToHost<float>(param), p, 2e-5, 1e-6, "param");
    if (momentum != 0) ExpectClose(ToHost<float>(buffer), buf, 2e-5, 1e-6, "momentum");
  }
}

TEST_P(OptimizerTest, Adagrad) {
  const DenseAdagradOptions options{.learning_rate = 0.05f, .eps = 1e-8f, .weight_decay = 0.001f};
  std::vector<float> p0;
  Tensor param = Random({10, 100}, &p0);
  Tensor sum_sq = F32(std::vector<float>(kSize, 0.0f), {10, 100});
  std::vector<double> p = ToDouble(p0), state(kSize, 0.0);
  for (const std::vector<float>& g : Grads()) {
    Tensor grad = F32(g, {10, 100});
    AdagradUpdate(param, sum_sq, grad, options);
    for (int i = 0; i < kSize; ++i) {
      const double d = g[i] + 0.001 * p[i];
      state[i] += d * d;
      p[i] -= 0.05 * d / (std::sqrt(state[i]) + double{1e-8f});
    }
  }
  ExpectClose(ToHost<float>(param), p, 2e-5, 1e-6, "param");
  ExpectClose(ToHost<float>(sum_sq), state, 2e-5, 1e-6, "sum_sq");
}

TEST_P(OptimizerTest, AdamWithBiasCorrectionAndWeightDecay) {
  const DenseAdamOptions options{.learning_rate = 0.01f, .weight_decay = 0.1f};
  const double b1 = double{options.beta1}, b2 = double{options.beta2};
  std::vector<float> p0;
  Tensor param = Random({kSize}, &p0);
  Tensor m = F32(std::vector<float>(kSize, 0.0f), {kSize});
  Tensor v = F32(std::vector<float>(kSize, 0.0f), {kSize});
  std::vector<double> p = ToDouble(p0), rm(kSize, 0.0), rv(kSize, 0.0);
  int64_t step = 0;
  for (const std::vector<float>& g : Grads()) {
    Tensor grad = F32(g, {kSize});
    AdamUpdate(param, m, v, grad, ++step, options);
    for (int i = 0; i < kSize; ++i) {
      rm[i] = b1 * rm[i] + (1 - b1) * g[i];
      rv[i] = b2 * rv[i] + (1 - b2) * double{g[i]} * g[i];
      const double mhat = rm[i] / (1 - std::pow(b1, step));
      const double vhat = rv[i] / (1 - std::pow(b2, step));
      p[i] -= 0.01 * (mhat / (std::sqrt(vhat) + double{1e-8f}) + 0.1 * p[i]);
    }
  }
  ExpectClose(ToHost<float>(param), p, 2e-5, 1e-6, "param");
  ExpectClose(ToHost<float>(m), rm, 2e-5, 1e-6, "m");
  ExpectClose(ToHost<float>(v), rv, 2e-5, 1e-6, "v");
}

TEST_P(OptimizerTest, RejectsBadArguments) {
  Tensor param = Empty({8});
  Tensor grad = Empty({8});
  Tensor state = Empty({8});
  Tensor state2 = Empty({8});
  Tensor wrong = Empty({4, 2});
  ExpectInvalid([&] { SgdUpdate(param, wrong, {}); },
                "[SgdUpdate] `grad` has shape [4, 2]; expected [8]");
  ExpectInvalid([&] { SgdUpdate(param, grad, {.momentum = 0.9f}); },
                "[SgdUpdate] `momentum_buffer` is null; momentum 0.9 needs one");
  ExpectInvalid([&] { SgdUpdate(param, grad, {.momentum = 0.9f}, &wrong); },
                "[SgdUpdate] `momentum_buffer` has shape [4, 2]; expected [8]");
  ExpectInvalid([&] { SgdUpdate(param, param, {}); },
                "[SgdUpdate] `param` and `grad` are one tensor");
  ExpectInvalid([&] { SgdUpdate(param, grad, {.learning_rate = -1.0f}); },
                "[SgdUpdate] `learning_rate` is -1; expected a value in [0, inf)");
  ExpectInvalid([&] { AdagradUpdate(param, param, grad, {}); },
                "[AdagradUpdate] `sum_sq` and `param` are one tensor");
  ExpectInvalid([&] { AdagradUpdate(param, state, grad, {.eps = 0.0f}); },
                "[AdagradUpdate] `eps` is 0; expected a finite value > 0");
  ExpectInvalid([&] { AdamUpdate(param, state, state2, grad, 0, {}); },
                "[AdamUpdate] `step` is 0; steps count from 1");
  ExpectInvalid([&] { AdamUpdate(param, state, state2, grad, 1, {.beta1 = 1.0f}); },
                "[AdamUpdate] `beta1` is 1; expected a value in [0, 1)");
  ExpectInvalid([&] { AdamUpdate(param, state, state, grad, 1, {}); },
                "[AdamUpdate] `v` and `m` are one tensor");
  ExpectInvalid([&] { AdamUpdate(param, state, grad, grad, 1, {}); },
                "[AdamUpdate] `v` and `grad` are one tensor");
}

INSTANTIATE_TEST_SUITE_P(Dense, OptimizerTest, ::testing::ValuesIn(EngineNames()), EngineParamName);

}  // namespace
}  // namespace ember::ops::testing
