// optimizer_example: SGD with momentum, Adagrad and Adam each pull a
// parameter vector towards a target, minimizing |p - target|^2 / 2 (the
// gradient p - target computed by Copy and Axpy), on the engine ENGINE_TYPE
// names (GPU 0 if there is one, else the CPU), against the same steps in
// double. Exits 1 on a mismatch.

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "ops/elementwise.h"
#include "ops/examples/dense_example_util.h"
#include "ops/optimizer.h"

using ember::examples::Context;
using ember::examples::Download;
using ember::examples::DType;
using ember::examples::MaxError;
using ember::examples::Report;
using ember::examples::Tensor;
using ember::examples::Upload;

constexpr int kSize = 512;
constexpr int kSteps = 50;

enum class Kind { kSgd, kAdagrad, kAdam };

// Runs kSteps of `kind` on the engine and in double; reports the error.
bool Run(ember::engine::Engine& engine, Context ctx, Kind kind, const char* name) {
  std::vector<float> target(kSize);
  for (int i = 0; i < kSize; ++i) target[i] = std::sin(0.1f * i);
  auto zeros = [&] { return Upload(engine, std::vector<float>(kSize, 0.0f), {kSize}, ctx); };
  Tensor param = zeros(), grad = zeros(), state1 = zeros(), state2 = zeros();
  Tensor ttarget = Upload(engine, target, {kSize}, ctx);
  std::vector<double> p(kSize, 0.0), s1(kSize, 0.0), s2(kSize, 0.0);
  const double b1 = 0.9, b2 = 0.999, lr = kind == Kind::kAdam ? 0.05 : 0.1;
  for (int step = 1; step <= kSteps; ++step) {
    ember::ops::Copy(param, grad);
    ember::ops::Axpy(-1.0f, ttarget, grad);  // grad = p - target
    switch (kind) {
      case Kind::kSgd:
        ember::ops::SgdUpdate(param, grad, {.learning_rate = 0.1f, .momentum = 0.9f}, &state1);
        break;
      case Kind::kAdagrad:
        ember::ops::AdagradUpdate(param, state1, grad, {.learning_rate = 0.1f});
        break;
      case Kind::kAdam:
        ember::ops::AdamUpdate(param, state1, state2, grad, step, {.learning_rate = 0.05f});
        break;
    }
    for (int i = 0; i < kSize; ++i) {
      const double g = p[i] - double{target[i]};
      if (kind == Kind::kSgd) p[i] -= lr * (s1[i] = 0.9 * s1[i] + g);
      if (kind == Kind::kAdagrad) p[i] -= lr * g / (std::sqrt(s1[i] += g * g) + 1e-8);
      if (kind == Kind::kAdam) {
        s1[i] = b1 * s1[i] + (1 - b1) * g;
        s2[i] = b2 * s2[i] + (1 - b2) * g * g;
        const double mhat = s1[i] / (1 - std::pow(b1, step)),
                     vhat = s2[i] / (1 - std::pow(b2, step));
        p[i] -= lr * mhat / (std::sqrt(vhat) + 1e-8);
      }
    }
  }
  const std::vector<float> got = Download(param);
  double distance = 0;
  for (int i = 0; i < kSize; ++i) distance += (got[i] - target[i]) * (got[i] - target[i]);
  std::printf("%-8s after %d steps: |p - target| = %.4f (from %.4f); p[1..3] = %.4f %.4f %.4f\n",
              name, kSteps, std::sqrt(distance), std::sqrt(kSize / 2.0), got[1], got[2], got[3]);
  return Report(name, MaxError(got, p), 1e-4);
}

int main() {
  ember::engine::Engine& engine = ember::engine::Engine::Get();
  const Context ctx = ember::examples::ExampleContext();
  std::printf("%s on %s\n", std::string(engine.name()).c_str(), ctx.ToString().c_str());
  const bool sgd = Run(engine, ctx, Kind::kSgd, "SGD");
  const bool adagrad = Run(engine, ctx, Kind::kAdagrad, "Adagrad");
  const bool adam = Run(engine, ctx, Kind::kAdam, "Adam");
  engine.WaitForAll();  // the tensors' deletions, before exit tears CUDA down
  return sgd && adagrad && adam ? 0 : 1;
}
