// embedding_bag_example: a 3-table TBE forward and SGD backward on ENGINE_TYPE's engine (GPU 0
// if any), against a CPU loop: with grad_output all ones, a row moves by -lr per lookup.

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/base/device.h"
#include "engine/engine.h"
#include "ops/embedding_bag.h"
#include "storage/tensor.h"

using ember::engine::Context;
using ember::storage::Tensor;

// A tensor on `ctx` holding `values` (1-D unless `shape`), staged through a host tensor.
template <typename T>
Tensor Upload(ember::engine::Engine& engine, const std::vector<T>& values, Context ctx,
              std::vector<int64_t> shape = {}) {
  if (shape.empty()) shape = {static_cast<int64_t>(values.size())};
  Tensor host = Tensor::Empty(engine, shape, ember::storage::kDTypeOf<T>, Context::CPU());
  host.WaitToWrite();
  std::memcpy(host.data(), values.data(), host.bytes());
  if (!ctx.is_gpu()) return host;
  Tensor device = Tensor::Empty(engine, shape, ember::storage::kDTypeOf<T>, ctx);
  host.CopyTo(device);
  return device;
}

std::vector<float> Download(const Tensor& tensor) {
  Tensor host = Tensor::Empty(tensor.engine(), tensor.shape(), tensor.dtype(), Context::CPU());
  tensor.CopyTo(host);
  host.WaitToRead();
  std::vector<float> values(static_cast<std::size_t>(host.numel()));
  std::memcpy(values.data(), host.data(), host.bytes());
  return values;
}

double MaxError(const std::vector<float>& got, const std::vector<double>& expected) {
  double error = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i)
    error = std::fmax(error, std::fabs(got[i] - expected[i]));
  return error;
}

int main() {
  ember::engine::Engine& engine = ember::engine::Engine::Get();
  const Context ctx = ember::GpuCount() > 0 ? Context::GPU(0) : Context::CPU();
  const ember::ops::TbeTables tables({1000, 300, 50}, {16, 8, 4});
  const int64_t batch = 32;
  const float lr = 0.5f;

  std::mt19937 rng(42);
  std::vector<float> weights(static_cast<std::size_t>(tables.total_elements()));
  for (float& w : weights) w = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
  // Bags of 0 to 4 lookups and, beside them, the reference: pooled sums and SGD-stepped weights.
  std::vector<int64_t> indices;
  std::vector<int64_t> offsets = {0};
  std::vector<double> expected_out(static_cast<std::size_t>(batch * tables.total_dim()), 0.0);
  std::vector<double> expected_weights(weights.begin(), weights.end());
  for (int t = 0; t < tables.num_tables(); ++t) {
    for (int64_t b = 0; b < batch; ++b) {
      for (int i = std::uniform_int_distribution<int>(0, 4)(rng); i > 0; --i) {
        indices.push_back(std::uniform_int_distribution<int64_t>(0, tables.rows(t) - 1)(rng));
        const int64_t row = tables.weight_offset(t) + indices.back() * tables.dim(t);
        for (int64_t d = 0; d < tables.dim(t); ++d) {
          expected_out[b * tables.total_dim() + tables.output_offset(t) + d] += weights[row + d];
          expected_weights[row + d] -= lr;
        }
      }
      offsets.push_back(static_cast<int64_t>(indices.size()));
    }
  }

  Tensor w = Upload(engine, weights, ctx);
  Tensor idx = Upload(engine, indices, ctx);
  Tensor off = Upload(engine, offsets, ctx);
  const std::vector<int64_t> out_shape = {batch, tables.total_dim()};
  Tensor grad = Upload(engine, std::vector<float>(expected_out.size(), 1.0f), ctx, out_shape);
  Tensor out = Tensor::Empty(engine, out_shape, ember::storage::DType::kF32, ctx);
  const ember::ops::TbeBatch lookups = {.indices = &idx, .offsets = &off, .batch_size = batch};
  ember::ops::EmbeddingBagForward(tables, w, lookups, out);
  ember::ops::EmbeddingBagBackwardSgd(tables, w, lookups, grad, {.learning_rate = lr});

  const std::vector<float> got_out = Download(out);  // waits for the forward
  const double out_error = MaxError(got_out, expected_out);
  const double weight_error = MaxError(Download(w), expected_weights);
  std::printf("%s on %s: %zu lookups; out[0, 0..3] = %.4f %.4f %.4f %.4f\n",
              std::string(engine.name()).c_str(), ctx.ToString().c_str(), indices.size(),
              got_out[0], got_out[1], got_out[2], got_out[3]);
  const bool ok = out_error < 1e-4 && weight_error < 1e-4;
  std::printf("max error: forward %.2e, SGD step %.2e: %s\n", out_error, weight_error,
              ok ? "OK" : "MISMATCH");
  return ok ? 0 : 1;
}
