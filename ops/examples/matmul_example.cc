// matmul_example: a dense layer y = x W^T and its weight gradient
// dW = dy^T x, through Matmul on the engine ENGINE_TYPE names (GPU 0 if
// there is one: cuBLAS; else the CPU: BLAS), against loops in double.
// Exits 1 on a mismatch.

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "ops/examples/dense_example_util.h"
#include "ops/matmul.h"

using ember::examples::Context;
using ember::examples::Download;
using ember::examples::DType;
using ember::examples::MaxError;
using ember::examples::Report;
using ember::examples::Tensor;
using ember::examples::Upload;

// Pushes the ops, checks them, prints; true when everything matched.
bool Example(ember::engine::Engine& engine, Context ctx) {
  const int batch = 64, in = 128, out = 32;

  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> x(batch * in), w(out * in), dy(batch * out);
  for (std::vector<float>* v : {&x, &w, &dy}) {
    for (float& value : *v) value = uniform(rng);
  }
  // The reference: y[b][o] = sum_i x[b][i] w[o][i]; dW[o][i] = sum_b dy[b][o] x[b][i].
  std::vector<double> y_ref(batch * out, 0.0), dw_ref(out * in, 0.0);
  for (int b = 0; b < batch; ++b) {
    for (int o = 0; o < out; ++o) {
      for (int i = 0; i < in; ++i) {
        y_ref[b * out + o] += double{x[b * in + i]} * w[o * in + i];
        dw_ref[o * in + i] += double{dy[b * out + o]} * x[b * in + i];
      }
    }
  }

  Tensor tx = Upload(engine, x, {batch, in}, ctx);
  Tensor tw = Upload(engine, w, {out, in}, ctx);
  Tensor tdy = Upload(engine, dy, {batch, out}, ctx);
  Tensor ty = Tensor::Empty(engine, {batch, out}, DType::kF32, ctx);
  Tensor tdw = Tensor::Empty(engine, {out, in}, DType::kF32, ctx);
  ember::ops::Matmul(tx, tw, ty, /*transpose_a=*/false, /*transpose_b=*/true);
  ember::ops::Matmul(tdy, tx, tdw, /*transpose_a=*/true, /*transpose_b=*/false);

  const std::vector<float> y = Download(ty);  // waits for the forward
  std::printf("%s on %s: y = x W^T, [%d, %d] x [%d, %d]^T; y[0, 0..3] = %.4f %.4f %.4f %.4f\n",
              std::string(engine.name()).c_str(), ctx.ToString().c_str(), batch, in, out, in, y[0],
              y[1], y[2], y[3]);
  const bool forward = Report("forward y", MaxError(y, y_ref), 1e-4);
  const bool backward = Report("gradient dW", MaxError(Download(tdw), dw_ref), 1e-4);
  return forward && backward;
}

int main() {
  ember::engine::Engine& engine = ember::engine::Engine::Get();
  const bool ok = Example(engine, ember::examples::ExampleContext());
  engine.WaitForAll();  // the tensors' deletions, before exit tears CUDA down
  return ok ? 0 : 1;
}
