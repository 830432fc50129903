// Every dense op's CUDA kernel against its CPU kernel on the same random
// inputs, on every engine type; the random fills bit for bit. Skips on a
// machine without a CUDA device. Tolerances: the kernels share their math
// (or are cuBLAS and BLAS), so they differ by summation order and fused
// multiply-adds only: 1e-5 relative plus a small absolute term scaled by
// the number of terms summed, as in the CPU tests.

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "engine/base/device.h"
#include "ops/elementwise.h"
#include "ops/interaction.h"
#include "ops/loss.h"
#include "ops/matmul.h"
#include "ops/optimizer.h"
#include "tests/ops/dense_test_util.h"

namespace ember::ops::testing {
namespace {

constexpr engine::Context kGpu = engine::Context::GPU(0);

// One tensor's twins: the same values on the CPU and on the GPU.
struct Twins {
  Tensor cpu;
  Tensor gpu;
};

class DenseCudaTest : public DenseOpTest {
 protected:
  void SetUp() override {
    if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
    DenseOpTest::SetUp();
  }

  Twins RandomTwins(std::vector<int64_t> shape, float lo = -1.0f, float hi = 1.0f) {
    std::vector<float> values;
    Tensor cpu = Random(shape, &values, lo, hi);
    return {std::move(cpu), F32(values, std::move(shape), kGpu)};
  }
  Twins ValueTwins(const std::vector<float>& values, const std::vector<int64_t>& shape) {
    return {F32(values, shape), F32(values, shape, kGpu)};
  }
  Twins EmptyTwins(const std::vector<int64_t>& shape) { return {Empty(shape), Empty(shape, kGpu)}; }

  // Expects the GPU twin to match the CPU twin.
  static void ExpectMatch(const Twins& t, double rtol, double atol, const std::string& what) {
    const std::vector<double> expected = ToHost<double>(t.cpu);
    ExpectClose(ToHost<float>(t.gpu), expected, rtol, atol, what);
  }
};

TEST_P(DenseCudaTest, Matmul) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "ta=" << ta << " tb=" << tb);
      const int m = 65, n = 33, k = 300;
      Twins a = RandomTwins(ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k});
      Twins b = RandomTwins(tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n});
      Twins c = RandomTwins({m, n});
      Matmul(a.cpu, b.cpu, c.cpu, ta, tb, 1.5f, 0.5f);
      Matmul(a.gpu, b.gpu, c.gpu, ta, tb, 1.5f, 0.5f);
      ExpectMatch(c, 1e-5, 2e-6 * k, "c");
    }
  }
  Twins empty_a = EmptyTwins({4, 0});
  Twins empty_b = EmptyTwins({0, 3});
  Twins c = RandomTwins({4, 3});
  Matmul(empty_a.cpu, empty_b.cpu, c.cpu, false, false, 1.0f, 2.0f);
  Matmul(empty_a.gpu, empty_b.gpu, c.gpu, false, false, 1.0f, 2.0f);
  ExpectMatch(c, 0, 0, "K == 0");
}

// With TF32 allowed the GPU's product is within TF32's rounding of the
// CPU's f32 one (inputs rounded to 10 mantissa bits: a relative error of
// at most 2^-11 each, about 1e-3 a product) and, on a GPU with tensor
// cores, measurably further from it than the f32 product: TF32 was used.
TEST_P(DenseCudaTest, MatmulWithTensorFloat32) {
  const int m = 128, n = 96, k = 512;
  for (bool tb : {false, true}) {
    SCOPED_TRACE(::testing::Message() << "tb=" << tb);
    Twins a = RandomTwins({m, k});
    Twins b = RandomTwins(tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n});
    Twins c = RandomTwins({m, n});
    Tensor f32 = Empty({m, n}, kGpu);
    Matmul(a.gpu, b.gpu, f32, false, tb);
    Matmul(a.cpu, b.cpu, c.cpu, false, tb);
    Matmul(a.gpu, b.gpu, c.gpu, false, tb, 1.0f, 0.0f, MatmulPrecision::kTensorFloat32);
    // |a_i b_i| averages 1/4 on U(-1, 1): each sum's terms total about k / 4.
    ExpectMatch(c, 0, 2e-3 * k / 4, "c with TF32");
    const std::vector<float> want = ToHost<float>(c.cpu);
    const std::vector<float> got_f32 = ToHost<float>(f32);
    const std::vector<float> got_tf32 = ToHost<float>(c.gpu);
    double err_f32 = 0, err_tf32 = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      err_f32 = std::max<double>(err_f32, std::abs(got_f32[i] - want[i]));
      err_tf32 = std::max<double>(err_tf32, std::abs(got_tf32[i] - want[i]));
    }
    EXPECT_GT(err_tf32, 10 * err_f32) << "TF32 allowed, yet the product is as exact as f32's";
  }
}

// Split-K shapes (small C, long K) are the ones that use cuBLAS's
// workspace; many of them in flight on the engine's streams must not share
// scratch memory.
TEST_P(DenseCudaTest, ConcurrentMatmulsOnManyStreams) {
  const int kOps = 12, m = 32, n = 32, k = 8192;
  std::vector<Twins> as, bs, cs;
  for (int i = 0; i < kOps; ++i) {
    as.push_back(RandomTwins({m, k}));
    bs.push_back(RandomTwins({k, n}));
    cs.push_back(EmptyTwins({m, n}));
  }
  for (int i = 0; i < kOps; ++i) Matmul(as[i].gpu, bs[i].gpu, cs[i].gpu);
  for (int i = 0; i < kOps; ++i) Matmul(as[i].cpu, bs[i].cpu, cs[i].cpu);
  for (int i = 0; i < kOps; ++i) ExpectMatch(cs[i], 1e-5, 2e-6 * k, "c " + std::to_string(i));
}

TEST_P(DenseCudaTest, BiasAndRelu) {
  Twins y = RandomTwins({3001, 70});
  Twins bias = RandomTwins({70});
  Twins db = EmptyTwins({70});
  Twins dx = EmptyTwins({3001, 70});
  Twins dy = RandomTwins({3001, 70});
  for (bool gpu : {false, true}) {
    auto pick = [gpu](Twins& t) -> Tensor& { return gpu ? t.gpu : t.cpu; };
    AddBias(pick(y), pick(bias));
    Relu(pick(y), pick(y));
    ReluGrad(pick(dy), pick(y), pick(dx));
    BiasGrad(pick(dx), pick(db));
  }
  ExpectMatch(y, 1e-6, 1e-7, "relu(y + bias)");
  ExpectMatch(dx, 0, 0, "relu grad");
  ExpectMatch(db, 1e-6, 1e-7, "bias grad");
}

// The fused op on the GPU: the CPU's bits, and the unfused ops' on the GPU,
// at a DLRM layer's shape and an odd one.
TEST_P(DenseCudaTest, AddBiasReluMatchesTheCpuAndTheUnfusedOps) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{8192, 1024}, {3001, 7}}) {
    SCOPED_TRACE(::testing::Message() << rows << " x " << cols);
    Twins y = RandomTwins({rows, cols});
    Twins bias = RandomTwins({cols});
    Tensor unfused = Empty({rows, cols}, kGpu);
    Copy(y.gpu, unfused);
    AddBiasRelu(y.cpu, bias.cpu);
    AddBiasRelu(y.gpu, bias.gpu);
    AddBias(unfused, bias.gpu);
    Relu(unfused, unfused);
    ExpectMatch(y, 0, 0, "relu(y + bias)");
    EXPECT_EQ(ToHost<float>(y.gpu), ToHost<float>(unfused));
  }
}

// The DLRM step's shapes (tall: 8192 rows of 1 to 1024 columns), rows
// fewer than a chunk, and no rows at all (zeros); the same bits run after
// run.
TEST_P(DenseCudaTest, BiasGradOnTallWideAndEmptyShapes) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{8192, 1},
                            {8192, 64},
                            {8192, 1024},
                            {5, 3},
                            {100003, 7},
                            {0, 4}}) {
    SCOPED_TRACE(::testing::Message() << rows << " x " << cols);
    Twins dy = RandomTwins({rows, cols});
    Twins db = EmptyTwins({cols});
    BiasGrad(dy.cpu, db.cpu);
    BiasGrad(dy.gpu, db.gpu);
    ExpectMatch(db, 1e-6, 1e-7 * static_cast<double>(rows), "bias grad");
    Tensor again = Empty({cols}, kGpu);
    BiasGrad(dy.gpu, again);
    EXPECT_EQ(ToHost<float>(again), ToHost<float>(db.gpu)) << "not the same bits twice";
  }
}

TEST_P(DenseCudaTest, BasicElementwise) {
  Twins a = RandomTwins({1 << 16});
  Twins b = RandomTwins({1 << 16});
  Twins out = EmptyTwins({1 << 16});
  Twins copy = EmptyTwins({256, 256});
  for (bool gpu : {false, true}) {
    auto pick = [gpu](Twins& t) -> Tensor& { return gpu ? t.gpu : t.cpu; };
    Fill(pick(out), 0.25f);
    Axpy(-1.5f, pick(a), pick(out));
    Mul(pick(out), pick(b), pick(out));
    Add(pick(a), pick(out), pick(out));
    Scale(pick(out), 3.0f);
    Copy(pick(out), pick(copy));
  }
  ExpectMatch(out, 1e-5, 1e-6, "fill, axpy, mul, add, scale");
  ExpectMatch(copy, 1e-5, 1e-6, "copy");
}

TEST_P(DenseCudaTest, RandomFillsAreBitIdentical) {
  const int64_t n = (1 << 20) + 3;
  for (uint64_t seed : {0ull, 1ull, 0x9e3779b97f4a7c15ull}) {
    Twins uniform = EmptyTwins({n});
    Twins normal = EmptyTwins({n});
    RandomUniform(uniform.cpu, seed, -0.5f, 2.0f);
    RandomUniform(uniform.gpu, seed, -0.5f, 2.0f);
    RandomNormal(normal.cpu, seed, 0.5f, 3.0f);
    RandomNormal(normal.gpu, seed, 0.5f, 3.0f);
    for (Twins* t : {&uniform, &normal}) {
      const std::vector<float> cpu = ToHost<float>(t->cpu);
      const std::vector<float> gpu = ToHost<float>(t->gpu);
      int64_t differ = 0;
      // Bits, not values: -0 against +0 or two NaNs must count as a difference.
      for (int64_t i = 0; i < n; ++i) {
        differ += std::bit_cast<uint32_t>(cpu[i]) != std::bit_cast<uint32_t>(gpu[i]);
      }
      EXPECT_EQ(differ, 0) << (t == &uniform ? "uniform" : "normal") << ", seed " << seed;
    }
  }
}

TEST_P(DenseCudaTest, DotInteraction) {
  // DLRM's shape and odd ones stage a sample in shared memory; 100 x 130
  // does not fit there (the global-memory kernels); 70000 samples outrun
  // the grid, so blocks take several.
  for (auto [batch, f, d] : {std::tuple{64, 27, 128}, std::tuple{3, 5, 7}, std::tuple{2, 40, 33},
                             std::tuple{3, 100, 130}, std::tuple{70000, 4, 8}}) {
    SCOPED_TRACE(::testing::Message() << "B=" << batch << " F=" << f << " D=" << d);
    const int pairs = f * (f - 1) / 2;
    Twins input = RandomTwins({batch, f, d});
    Twins output = EmptyTwins({batch, pairs});
    Twins grad_output = RandomTwins({batch, pairs});
    Twins grad_input = EmptyTwins({batch, f, d});
    DotInteraction(input.cpu, output.cpu);
    DotInteraction(input.gpu, output.gpu);
    DotInteractionBackward(input.cpu, grad_output.cpu, grad_input.cpu);
    DotInteractionBackward(input.gpu, grad_output.gpu, grad_input.gpu);
    ExpectMatch(output, 1e-5, 1e-6 * d, "output");
    ExpectMatch(grad_input, 1e-5, 1e-6 * f, "grad_input");
  }
}

TEST_P(DenseCudaTest, SigmoidBinaryCrossEntropy) {
  const int64_t n = 100003;
  Twins logits = RandomTwins({n, 1}, -12.0f, 12.0f);
  std::vector<float> labels(n);
  for (float& label : labels) label = static_cast<float>(rng_() & 1);
  Twins y = ValueTwins(labels, {n, 1});
  Twins loss = EmptyTwins({1});
  Twins grad = EmptyTwins({n, 1});
  Twins probs = EmptyTwins({n, 1});
  SigmoidBinaryCrossEntropy(logits.cpu, y.cpu, loss.cpu, grad.cpu);
  SigmoidBinaryCrossEntropy(logits.gpu, y.gpu, loss.gpu, grad.gpu);
  Sigmoid(logits.cpu, probs.cpu);
  Sigmoid(logits.gpu, probs.gpu);
  ExpectMatch(loss, 1e-5, 1e-7, "loss");
  ExpectMatch(grad, 1e-5, 1e-7 / n, "grad_logits");
  ExpectMatch(probs, 1e-5, 1e-12, "probs");
}

TEST_P(DenseCudaTest, Optimizers) {
  const int64_t n = 50000;
  Twins sgd = RandomTwins({n});
  Twins buffer = ValueTwins(std::vector<float>(n, 0.0f), {n});
  Twins adagrad = RandomTwins({n});
  Twins sum_sq = ValueTwins(std::vector<float>(n, 0.0f), {n});
  Twins adam = RandomTwins({n});
  Twins m = ValueTwins(std::vector<float>(n, 0.0f), {n});
  Twins v = ValueTwins(std::vector<float>(n, 0.0f), {n});
  for (int64_t step = 1; step <= 4; ++step) {
    Twins grad = RandomTwins({n});
    for (bool gpu : {false, true}) {
      auto pick = [gpu](Twins& t) -> Tensor& { return gpu ? t.gpu : t.cpu; };
      SgdUpdate(pick(sgd), pick(grad),
                {.learning_rate = 0.1f, .momentum = 0.9f, .weight_decay = 0.01f}, &pick(buffer));
      AdagradUpdate(pick(adagrad), pick(sum_sq), pick(grad), {.weight_decay = 0.01f});
      AdamUpdate(pick(adam), pick(m), pick(v), pick(grad), step, {.weight_decay = 0.1f});
    }
  }
  for (Twins* t : {&sgd, &buffer, &adagrad, &sum_sq, &adam, &m, &v}) {
    ExpectMatch(*t, 1e-5, 1e-6, "optimizer state");
  }
}

// Loading first changes nothing of the results; a GPU that does not exist
// is a CudaError naming the call, not a crash.
TEST_P(DenseCudaTest, MatmulKernelsLoadAheadOnTheCallingThread) {
  LoadMatmulKernels(0);
  LoadMatmulKernels(0);  // a second call finds the thread's handle
  Twins a = RandomTwins({5, 7});
  Twins b = RandomTwins({7, 3});
  Twins c = EmptyTwins({5, 3});
  Matmul(a.cpu, b.cpu, c.cpu);
  Matmul(a.gpu, b.gpu, c.gpu);
  ExpectMatch(c, 1e-5, 1e-5 * 7, "matmul after LoadMatmulKernels");
  const int devices = GpuCount();
  try {
    LoadMatmulKernels(devices);
    ADD_FAILURE() << "LoadMatmulKernels(" << devices << ") did not throw";
  } catch (const CudaError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("cudaSetDevice"));
  }
}

TEST_P(DenseCudaTest, RejectsTensorsOnTwoContexts) {
  Twins a = EmptyTwins({2, 2});
  Twins b = EmptyTwins({2, 2});
  Twins c = EmptyTwins({2, 2});
  ExpectInvalid([&] { Matmul(a.cpu, b.gpu, c.gpu); }, "[Matmul] the tensors are on cpu and gpu(0)");
  ExpectInvalid([&] { AddBias(c.gpu, Empty({2})); }, "[AddBias] the tensors are on cpu and gpu(0)");
  ExpectInvalid([&] { Copy(a.cpu, c.gpu); }, "[Copy] the tensors are on cpu and gpu(0)");
  Twins x = EmptyTwins({2, 3, 4});
  Twins out = EmptyTwins({2, 3});
  ExpectInvalid([&] { DotInteraction(x.gpu, out.cpu); },
                "[DotInteraction] the tensors are on gpu(0) and cpu");
  Twins g = EmptyTwins({4});
  Twins p = EmptyTwins({4});
  ExpectInvalid([&] { SgdUpdate(p.gpu, g.cpu, {}); },
                "[SgdUpdate] the tensors are on gpu(0) and cpu");
}

INSTANTIATE_TEST_SUITE_P(Dense, DenseCudaTest, ::testing::ValuesIn(EngineNames()), EngineParamName);

}  // namespace
}  // namespace ember::ops::testing
