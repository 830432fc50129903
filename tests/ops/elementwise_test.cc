// The elementwise ops against double-precision references, on every engine
// type. Tolerances: one f32 operation per element is exact or 1 rounding
// (rtol 1e-6, or 0 where the result is exact: ReLU, Fill, Copy); BiasGrad
// sums M values in double, then rounds once (rtol 1e-6); RandomNormal's
// polynomial log and cos are checked against libm in double to 1e-6 (f32
// output rounding), and its moments to 5 standard errors.

#include "ops/elementwise.h"

#include <cmath>
#include <numbers>
#include <vector>

#include "tests/ops/dense_test_util.h"

namespace ember::ops::testing {
namespace {

class ElementwiseTest : public DenseOpTest {};

std::vector<double> Map(const std::vector<float>& x, double (*f)(double)) {
  std::vector<double> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = f(x[i]);
  return y;
}

TEST_P(ElementwiseTest, AddBiasAndBiasGrad) {
  const int m = 37;
  const int n = 19;
  std::vector<float> y0, bias;
  Tensor y = Random({m, n}, &y0);
  Tensor b = Random({n}, &bias);
  AddBias(y, b);
  std::vector<double> expected(m * n);
  for (int i = 0; i < m * n; ++i) expected[i] = double{y0[i]} + bias[i % n];
  ExpectClose(ToHost<float>(y), expected, 1e-6, 1e-7, "y");

  Tensor db = Empty({n});
  BiasGrad(y, db);
  const std::vector<float> y1 = ToHost<float>(y);
  std::vector<double> sums(n, 0.0);
  for (int i = 0; i < m * n; ++i) sums[i % n] += y1[i];
  ExpectClose(ToHost<float>(db), sums, 1e-6, 1e-7, "db");
}

// The fused op is AddBias then Relu, bit for bit, NaN included (to 0).
TEST_P(ElementwiseTest, AddBiasReluIsAddBiasThenRelu) {
  std::vector<float> y0, bias;
  const Tensor source = Random({41, 23}, &y0);
  const Tensor b = Random({23}, &bias);
  y0[5] = NAN;
  y0[6] = -bias[6];  // exactly 0 before the ReLU
  Tensor fused = F32(y0, {41, 23});
  Tensor unfused = F32(y0, {41, 23});
  AddBiasRelu(fused, b);
  AddBias(unfused, b);
  Relu(unfused, unfused);
  const std::vector<float> got = ToHost<float>(fused);
  EXPECT_EQ(got, ToHost<float>(unfused));
  EXPECT_EQ(got[5], 0.0f);
  EXPECT_EQ(got[6], 0.0f);
  ExpectInvalid([&] { AddBiasRelu(fused, Empty({3})); },
                "[AddBiasRelu] `bias` has shape [3]; expected [23]");
}

TEST_P(ElementwiseTest, BiasGradOfNoRowsIsZero) {
  Tensor db = F32({1, 2, 3}, {3});
  BiasGrad(Empty({0, 3}), db);
  EXPECT_EQ(ToHost<float>(db), std::vector<float>(3, 0.0f));
}

TEST_P(ElementwiseTest, ReluAndItsGradient) {
  std::vector<float> x, dy;
  Tensor tx = Random({1000}, &x);
  Tensor tdy = Random({1000}, &dy);
  Tensor y = Empty({1000});
  Relu(tx, y);
  ExpectClose(ToHost<float>(y), Map(x, [](double v) { return v > 0 ? v : 0.0; }), 0, 0, "y");
  Tensor dx = Empty({1000});
  ReluGrad(tdy, y, dx);
  std::vector<double> expected(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) expected[i] = x[i] > 0 ? dy[i] : 0.0;
  ExpectClose(ToHost<float>(dx), expected, 0, 0, "dx");
  Relu(tx, tx);  // in place; its gradient from the output alone
  ReluGrad(tdy, tx, tdy);
  ExpectClose(ToHost<float>(tdy), expected, 0, 0, "dx in place");
}

TEST_P(ElementwiseTest, FillScaleAxpyAddMulCopy) {
  std::vector<float> a, b;
  Tensor ta = Random({6, 7}, &a);
  Tensor tb = Random({6, 7}, &b);
  Tensor out = Empty({6, 7});
  Fill(out, 2.5f);
  ExpectClose(ToHost<float>(out), std::vector<double>(42, 2.5), 0, 0, "fill");
  std::vector<double> sum(42), product(42), axpy(42), scaled(42);
  for (int i = 0; i < 42; ++i) {
    sum[i] = double{a[i]} + b[i];
    product[i] = double{a[i]} * b[i];
    axpy[i] = 2.5 + 0.75 * a[i];
    scaled[i] = -3.0 * a[i];
  }
  Axpy(0.75f, ta, out);
  ExpectClose(ToHost<float>(out), axpy, 1e-6, 1e-7, "axpy");
  Add(ta, tb, out);
  ExpectClose(ToHost<float>(out), sum, 1e-6, 1e-7, "add");
  Mul(ta, tb, out);
  ExpectClose(ToHost<float>(out), product, 1e-6, 1e-7, "mul");
  Tensor flat = Empty({42});
  Copy(ta, flat);  // a reshape: counts match
  ExpectClose(ToHost<float>(flat), Map(a, [](double v) { return v; }), 0, 0, "copy");
  Scale(ta, -3.0f);
  ExpectClose(ToHost<float>(ta), scaled, 1e-6, 1e-7, "scale");
  Add(ta, tb, ta);  // out may be an input
  for (int i = 0; i < 42; ++i) sum[i] = static_cast<double>(static_cast<float>(scaled[i])) + b[i];
  ExpectClose(ToHost<float>(ta), sum, 1e-6, 1e-7, "add in place");
}

TEST_P(ElementwiseTest, RandomUniformIsSeededAndInRange) {
  const int n = 200000;
  Tensor x = Empty({n});
  RandomUniform(x, 42, -2.0f, 3.0f);
  const std::vector<float> values = ToHost<float>(x);
  double mean = 0;
  for (float v : values) {
    ASSERT_GE(v, -2.0f);
    ASSERT_LE(v, 3.0f);
    mean += v / n;
  }
  EXPECT_NEAR(mean, 0.5, 5 * 5 / std::sqrt(12.0 * n));
  for (int i = 0; i < n; i += 997) {
    const double u = static_cast<double>(RandomBits(42, i) >> 40) * 0x1p-24;
    EXPECT_NEAR(values[i], -2.0 + 5.0 * u, 1e-6) << "element " << i;
  }
  Tensor prefix = Empty({1000});
  RandomUniform(prefix, 42, -2.0f, 3.0f);
  const std::vector<float> head(values.begin(), values.begin() + 1000);
  EXPECT_EQ(ToHost<float>(prefix), head) << "element i depends on (seed, i) only";
  RandomUniform(prefix, 43, -2.0f, 3.0f);
  EXPECT_NE(ToHost<float>(prefix), head) << "another seed, other values";
}

TEST_P(ElementwiseTest, RandomNormalMatchesBoxMullerAndMoments) {
  const int n = 200000;
  Tensor x = Empty({n});
  RandomNormal(x, 7, 1.0f, 2.0f);
  const std::vector<float> values = ToHost<float>(x);
  double mean = 0;
  double square = 0;
  for (float v : values) {
    ASSERT_TRUE(std::isfinite(v));
    mean += double{v} / n;
    square += double{v} * v / n;
  }
  EXPECT_NEAR(mean, 1.0, 5 * 2.0 / std::sqrt(n));
  EXPECT_NEAR(square - mean * mean, 4.0, 5 * 4.0 * std::sqrt(2.0 / n));
  std::vector<float> sampled;
  std::vector<double> expected;
  for (int i = 0; i < n; i += 101) {
    const double u1 = static_cast<double>((RandomBits(7, 2 * i) >> 11) + 1) * 0x1p-53;
    const double u2 = static_cast<double>(RandomBits(7, 2 * i + 1) >> 11) * 0x1p-53;
    const double z = std::sqrt(-2 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2);
    sampled.push_back(values[i]);
    expected.push_back(1.0 + 2.0 * z);
  }
  ExpectClose(sampled, expected, 1e-6, 1e-6, "normal against libm's Box-Muller");
}

// An op on empty tensors is an op all the same: it is pushed (each write
// counts in its var's version, so waits and later ops order after it),
// completes without error, and leaves the non-empty tensors it reads as
// they were; an empty tensor has no memory to touch.
TEST_P(ElementwiseTest, EmptyTensorsAreNoOps) {
  std::vector<float> bias_values;
  Tensor bias = Random({4}, &bias_values);
  Tensor x = Empty({0, 4});
  Tensor y = Empty({0, 4});
  const uint64_t x_version = engine_->VarVersion(x.var());
  const uint64_t y_version = engine_->VarVersion(y.var());
  Fill(x, 1.0f);
  RandomNormal(x, 1);
  Relu(x, x);
  AddBias(x, bias);
  AddBiasRelu(x, bias);
  Scale(x, 2.0f);
  Axpy(0.5f, x, y);
  Add(x, y, y);
  Copy(y, x);
  x.WaitToRead();  // rethrows an op's error
  y.WaitToRead();
  EXPECT_EQ(engine_->VarVersion(x.var()), x_version + 7);
  EXPECT_EQ(engine_->VarVersion(y.var()), y_version + 2);
  EXPECT_EQ(ToHost<float>(bias), bias_values);
  EXPECT_TRUE(ToHost<float>(x).empty());
}

TEST_P(ElementwiseTest, RejectsBadArguments) {
  Tensor y = Empty({2, 4});
  Tensor bias3 = Empty({3});
  Tensor x = Empty({8});
  Tensor ints = Tensor::Empty(*engine_, {8}, DType::kI32, engine::Context::CPU());
  ExpectInvalid([&] { AddBias(y, bias3); }, "[AddBias] `bias` has shape [3]; expected [4]");
  ExpectInvalid([&] { AddBias(x, bias3); }, "[AddBias] `y` has shape [8]; expected 2 dimensions");
  ExpectInvalid([&] { BiasGrad(y, bias3); }, "[BiasGrad] `db` has shape [3]; expected [4]");
  ExpectInvalid([&] { Relu(ints, x); }, "[Relu] `x` is i32; expected f32");
  ExpectInvalid([&] { Relu(x, y); }, "[Relu] `y` has shape [2, 4]; expected [8]");
  ExpectInvalid([&] { ReluGrad(x, y, x); }, "[ReluGrad] `y` has shape [2, 4]; expected [8]");
  Tensor none;
  ExpectInvalid([&] { Fill(none, 0); }, "[Fill] `x` is an empty tensor");
  ExpectInvalid([&] { RandomUniform(x, 1, 2.0f, 1.0f); }, "[RandomUniform] `lo` 2 is above `hi` 1");
  ExpectInvalid([&] { RandomUniform(x, 1, 0.0f, INFINITY); },
                "[RandomUniform] `hi` is inf; expected a finite value");
  ExpectInvalid([&] { RandomNormal(x, 1, 0.0f, -1.0f); }, "[RandomNormal] `stddev` is -1 < 0");
  ExpectInvalid([&] { Axpy(1.0f, x, x); }, "[Axpy] `y` and `x` are one tensor");
  ExpectInvalid([&] { Axpy(1.0f, y, x); }, "[Axpy] `x` has shape [2, 4]; expected [8]");
  ExpectInvalid([&] { Add(x, y, x); }, "[Add] `b` has shape [2, 4]; expected [8]");
  ExpectInvalid([&] { Mul(x, x, y); }, "[Mul] `out` has shape [2, 4]; expected [8]");
  ExpectInvalid([&] { Copy(x, bias3); }, "[Copy] `dst` has 3 elements (shape [3]); expected 8");
  ExpectInvalid([&] { Copy(x, x); }, "[Copy] `dst` and `src` are one tensor");
  ExpectInvalid([&] { Scale(ints, 2.0f); }, "[Scale] `x` is i32; expected f32");
}

INSTANTIATE_TEST_SUITE_P(Dense, ElementwiseTest, ::testing::ValuesIn(EngineNames()),
                         EngineParamName);

}  // namespace
}  // namespace ember::ops::testing
