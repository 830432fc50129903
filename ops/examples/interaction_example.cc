// interaction_example: DLRM's dot interaction of a batch of feature vectors
// (a dense vector and three embeddings per sample, drawn by RandomUniform)
// and its backward, on the engine ENGINE_TYPE names (GPU 0 if there is
// one, else the CPU), against loops in double. Exits 1 on a mismatch.

#include <cstdio>
#include <string>
#include <vector>

#include "ops/elementwise.h"
#include "ops/examples/dense_example_util.h"
#include "ops/interaction.h"

using ember::examples::Context;
using ember::examples::Download;
using ember::examples::DType;
using ember::examples::MaxError;
using ember::examples::Report;
using ember::examples::Tensor;

// Pushes the ops, checks them, prints; true when everything matched.
bool Example(ember::engine::Engine& engine, Context ctx) {
  const int batch = 16, features = 4, dim = 8;
  const int pairs = features * (features - 1) / 2;  // (1,0) (2,0) (2,1) (3,0) (3,1) (3,2)

  Tensor input = Tensor::Empty(engine, {batch, features, dim}, DType::kF32, ctx);
  Tensor output = Tensor::Empty(engine, {batch, pairs}, DType::kF32, ctx);
  Tensor grad_output = Tensor::Empty(engine, {batch, pairs}, DType::kF32, ctx);
  Tensor grad_input = Tensor::Empty(engine, {batch, features, dim}, DType::kF32, ctx);
  ember::ops::RandomUniform(input, /*seed=*/1, -1.0f, 1.0f);
  ember::ops::RandomUniform(grad_output, /*seed=*/2, -1.0f, 1.0f);
  ember::ops::DotInteraction(input, output);
  ember::ops::DotInteractionBackward(input, grad_output, grad_input);

  // The reference, pair by pair in DLRM's order.
  const std::vector<float> x = Download(input);
  const std::vector<float> dz = Download(grad_output);
  std::vector<double> z_ref, dx_ref(x.size(), 0.0);
  for (int b = 0; b < batch; ++b) {
    const float* xb = &x[b * features * dim];
    for (int i = 1; i < features; ++i) {
      for (int j = 0; j < i; ++j) {
        double dot = 0;
        for (int e = 0; e < dim; ++e) dot += double{xb[i * dim + e]} * xb[j * dim + e];
        z_ref.push_back(dot);
        const double g = dz[z_ref.size() - 1];
        for (int e = 0; e < dim; ++e) {
          dx_ref[(b * features + i) * dim + e] += g * xb[j * dim + e];
          dx_ref[(b * features + j) * dim + e] += g * xb[i * dim + e];
        }
      }
    }
  }

  const std::vector<float> z = Download(output);
  std::printf("%s on %s: [%d, %d, %d] -> [%d, %d]; sample 0: ", std::string(engine.name()).c_str(),
              ctx.ToString().c_str(), batch, features, dim, batch, pairs);
  for (int p = 0; p < pairs; ++p) std::printf("%.3f ", z[p]);
  std::printf("\n");
  const bool forward = Report("DotInteraction", MaxError(z, z_ref), 1e-5);
  const bool backward =
      Report("DotInteractionBackward", MaxError(Download(grad_input), dx_ref), 1e-5);
  return forward && backward;
}

int main() {
  ember::engine::Engine& engine = ember::engine::Engine::Get();
  const bool ok = Example(engine, ember::examples::ExampleContext());
  engine.WaitForAll();  // the tensors' deletions, before exit tears CUDA down
  return ok ? 0 : 1;
}
