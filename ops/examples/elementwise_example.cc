// elementwise_example: a layer's weights from a seeded RandomNormal, its
// bias and ReLU (AddBias, Relu) and their gradients (ReluGrad, BiasGrad),
// on the engine ENGINE_TYPE names (GPU 0 if there is one, else the CPU),
// against loops in double. The random fill runs on the CPU too: the two
// must agree bit for bit. Exits 1 on a mismatch.

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "ops/elementwise.h"
#include "ops/examples/dense_example_util.h"

using ember::examples::Context;
using ember::examples::Download;
using ember::examples::DType;
using ember::examples::MaxError;
using ember::examples::Report;
using ember::examples::Tensor;
using ember::examples::Upload;

// Pushes the ops, checks them, prints; true when everything matched.
bool Example(ember::engine::Engine& engine, Context ctx) {
  const int rows = 256, cols = 64;

  // Seeded initialization: the same values wherever it runs.
  Tensor w = Tensor::Empty(engine, {rows, cols}, DType::kF32, ctx);
  Tensor w_cpu = Tensor::Empty(engine, {rows, cols}, DType::kF32, Context::CPU());
  ember::ops::RandomNormal(w, /*seed=*/2024, /*mean=*/0.0f, /*stddev=*/0.5f);
  ember::ops::RandomNormal(w_cpu, 2024, 0.0f, 0.5f);
  const std::vector<float> init = Download(w);
  const std::vector<float> init_cpu = Download(w_cpu);
  const bool same_bits = std::memcmp(init.data(), init_cpu.data(), init.size() * 4) == 0;
  double mean = 0, square = 0;
  for (float v : init) {
    mean += v / init.size();
    square += double{v} * v / init.size();
  }
  std::printf("%s on %s: RandomNormal(0, 0.5): mean %.4f, stddev %.4f; bits %s the CPU's\n",
              std::string(engine.name()).c_str(), ctx.ToString().c_str(), mean,
              std::sqrt(square - mean * mean), same_bits ? "equal" : "DIFFER FROM");

  // y = relu(w + bias) in place; dx = dy where y > 0; db = column sums of dx.
  std::vector<float> bias(cols);
  for (int c = 0; c < cols; ++c) bias[c] = 0.01f * (c - cols / 2);
  Tensor tbias = Upload(engine, bias, {cols}, ctx);
  Tensor dy = Tensor::Empty(engine, {rows, cols}, DType::kF32, ctx);
  Tensor dx = Tensor::Empty(engine, {rows, cols}, DType::kF32, ctx);
  Tensor db = Tensor::Empty(engine, {cols}, DType::kF32, ctx);
  ember::ops::Fill(dy, 1.0f);
  ember::ops::AddBias(w, tbias);
  ember::ops::Relu(w, w);
  ember::ops::ReluGrad(dy, w, dx);
  ember::ops::BiasGrad(dx, db);

  std::vector<double> y_ref(init.size()), db_ref(cols, 0.0);
  for (int i = 0; i < rows * cols; ++i) {
    const double pre = double{static_cast<float>(init[i] + bias[i % cols])};
    y_ref[i] = pre > 0 ? pre : 0.0;
    db_ref[i % cols] += pre > 0 ? 1.0 : 0.0;
  }
  const std::vector<float> y = Download(w);
  std::printf("relu(w + bias)[0, 0..3] = %.4f %.4f %.4f %.4f; db[%d] = %.0f active rows\n", y[0],
              y[1], y[2], y[3], cols / 2, Download(db)[cols / 2]);
  const bool forward = Report("AddBias + Relu", MaxError(y, y_ref), 1e-6);
  const bool backward = Report("ReluGrad + BiasGrad", MaxError(Download(db), db_ref), 1e-3);
  return same_bits && forward && backward;
}

int main() {
  ember::engine::Engine& engine = ember::engine::Engine::Get();
  const bool ok = Example(engine, ember::examples::ExampleContext());
  engine.WaitForAll();  // the tensors' deletions, before exit tears CUDA down
  return ok ? 0 : 1;
}
