// loss_example: sigmoid binary cross-entropy of a batch of click logits
// against 0/1 labels, with its gradient and the click probabilities, on
// the engine ENGINE_TYPE names (GPU 0 if there is one, else the CPU),
// against the textbook formulas in double. Exits 1 on a mismatch.

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "ops/elementwise.h"
#include "ops/examples/dense_example_util.h"
#include "ops/loss.h"

using ember::examples::Context;
using ember::examples::Download;
using ember::examples::DType;
using ember::examples::MaxError;
using ember::examples::Report;
using ember::examples::Tensor;
using ember::examples::Upload;

// Pushes the ops, checks them, prints; true when everything matched.
bool Example(ember::engine::Engine& engine, Context ctx) {
  const int n = 1000;

  // Logits ~ N(0, 3), a few of them far out; every third sample clicked.
  Tensor logits = Tensor::Empty(engine, {n, 1}, DType::kF32, ctx);
  ember::ops::RandomNormal(logits, /*seed=*/11, 0.0f, 3.0f);
  std::vector<float> x = Download(logits);
  x[0] = 80.0f;  // confident and right (sample 0 is a click)
  x[1] = 80.0f;  // confident and wrong: costs about 80, not inf
  logits = Upload(engine, x, {n, 1}, ctx);
  std::vector<float> y(n);
  for (int i = 0; i < n; ++i) y[i] = i % 3 == 0 ? 1.0f : 0.0f;
  Tensor labels = Upload(engine, y, {n, 1}, ctx);
  Tensor loss = Tensor::Empty(engine, {1}, DType::kF32, ctx);
  Tensor grad = Tensor::Empty(engine, {n, 1}, DType::kF32, ctx);
  Tensor probs = Tensor::Empty(engine, {n, 1}, DType::kF32, ctx);
  ember::ops::SigmoidBinaryCrossEntropy(logits, labels, loss, grad);
  ember::ops::Sigmoid(logits, probs);

  double loss_ref = 0;
  std::vector<double> grad_ref(n), probs_ref(n);
  for (int i = 0; i < n; ++i) {
    const double p = 1.0 / (1.0 + std::exp(-double{x[i]}));
    // -[y log p + (1 - y) log(1 - p)], with log(1 - p) = log(p) - x.
    loss_ref -= (y[i] * std::log(p) + (1 - y[i]) * (std::log(p) - x[i])) / n;
    grad_ref[i] = (p - y[i]) / n;
    probs_ref[i] = p;
  }

  const std::vector<float> got_loss = Download(loss);
  const std::vector<float> got_probs = Download(probs);
  std::printf(
      "%s on %s: %d logits, mean loss %.6f (reference %.6f); p[0..3] = %.3f %.3f %.3f %.3f\n",
      std::string(engine.name()).c_str(), ctx.ToString().c_str(), n, got_loss[0], loss_ref,
      got_probs[0], got_probs[1], got_probs[2], got_probs[3]);
  const bool loss_ok = Report("loss", std::fabs(got_loss[0] - loss_ref), 1e-5);
  const bool grad_ok = Report("grad_logits", MaxError(Download(grad), grad_ref), 1e-8);
  const bool probs_ok = Report("sigmoid", MaxError(got_probs, probs_ref), 1e-6);
  return loss_ok && grad_ok && probs_ok;
}

int main() {
  ember::engine::Engine& engine = ember::engine::Engine::Get();
  const bool ok = Example(engine, ember::examples::ExampleContext());
  engine.WaitForAll();  // the tensors' deletions, before exit tears CUDA down
  return ok ? 0 : 1;
}
