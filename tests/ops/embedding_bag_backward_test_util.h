#pragma once

// Pieces shared by the TBE backward tests (CPU and CUDA): random batches
// with repeated rows, their tensors on a context, and one optimizer step
// pushed through the public functions of embedding_bag.h. Header-only, so
// that both test files use it without a library of their own.

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "ops/embedding_bag.h"
#include "tests/ops/op_test_util.h"

namespace ember::ops::testing {

// One batch on the host: indices and offsets as int64 (converted to the
// index dtype on upload), per-sample weights (empty: none).
struct HostBatch {
  std::vector<int64_t> indices;
  std::vector<int64_t> offsets;
  std::vector<float> per_sample_weights = {};
  int64_t batch_size = 0;
};

// Bags of 0..max_pooling indices; each index is, with probability `hot`,
// one of a table's three hot rows (0, 1 and its last row), otherwise
// uniform. Hot rows repeat within and across bags.
inline HostBatch RandomBatch(std::mt19937_64& rng, const TbeTables& tables, int64_t batch_size,
                             int max_pooling, bool weighted, double hot = 0.4) {
  HostBatch batch;
  batch.batch_size = batch_size;
  batch.offsets.push_back(0);
  std::uniform_int_distribution<int> length(0, max_pooling);
  std::bernoulli_distribution is_hot(hot);
  for (int t = 0; t < tables.num_tables(); ++t) {
    std::uniform_int_distribution<int64_t> any_row(0, tables.rows(t) - 1);
    std::uniform_int_distribution<int> hot_row(0, 2);
    for (int64_t b = 0; b < batch_size; ++b) {
      for (int i = length(rng); i > 0; --i) {
        int64_t row = any_row(rng);
        if (is_hot(rng)) {
          const int pick = hot_row(rng);
          row = pick == 2 ? tables.rows(t) - 1 : std::min<int64_t>(pick, tables.rows(t) - 1);
        }
        batch.indices.push_back(row);
      }
      batch.offsets.push_back(static_cast<int64_t>(batch.indices.size()));
    }
  }
  if (weighted) batch.per_sample_weights = RandomFloats(rng, batch.indices.size(), 0.5f, 1.5f);
  return batch;
}

// Uniform multiples of 1/256 in [-1, 1] (gradients): sums of their
// products with MakeWeightsDyadic's weights are exact in f32, so the GPU's
// f32 sums equal the CPU's f64 ones.
inline std::vector<float> DyadicGrads(std::mt19937_64& rng, std::size_t n) {
  std::uniform_int_distribution<int> k(-256, 256);
  std::vector<float> values(n);
  for (float& v : values) v = static_cast<float>(k(rng)) / 256.0f;
  return values;
}

// Per-sample weights k / 4, k in [2, 6].
inline void MakeWeightsDyadic(HostBatch& batch, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> k(2, 6);
  for (float& w : batch.per_sample_weights) w = static_cast<float>(k(rng)) / 4.0f;
}

// A batch's tensors on one context; view() is what the push functions take.
struct BatchTensors {
  BatchTensors(engine::Engine& engine, const HostBatch& host, engine::Context ctx,
               DType index_dtype)
      : indices(FromHost(engine, host.indices, {static_cast<int64_t>(host.indices.size())}, ctx,
                         index_dtype)),
        offsets(FromHost(engine, host.offsets, {static_cast<int64_t>(host.offsets.size())}, ctx,
                         index_dtype)),
        batch_size(host.batch_size) {
    if (!host.per_sample_weights.empty()) {
      per_sample_weights =
          FromHost(engine, host.per_sample_weights,
                   {static_cast<int64_t>(host.per_sample_weights.size())}, ctx, DType::kF32);
    }
  }

  [[nodiscard]] TbeBatch view() const {
    return {.indices = &indices,
            .offsets = &offsets,
            .per_sample_weights = per_sample_weights ? &per_sample_weights : nullptr,
            .batch_size = batch_size};
  }

  Tensor indices;
  Tensor offsets;
  Tensor per_sample_weights;
  int64_t batch_size;
};

enum class Optimizer { kSgd, kRowwiseAdagrad, kAdam };

inline std::string OptimizerName(Optimizer optimizer) {
  switch (optimizer) {
    case Optimizer::kSgd:
      return "Sgd";
    case Optimizer::kRowwiseAdagrad:
      return "RowwiseAdagrad";
    case Optimizer::kAdam:
      return "Adam";
  }
  return "?";
}

// The hyper-parameters every test uses.
inline SgdOptions TestSgd() { return {.learning_rate = 0.1f}; }
inline RowwiseAdagradOptions TestAdagrad() { return {.learning_rate = 0.1f, .eps = 1e-8f}; }
inline AdamOptions TestAdam() {
  return {
      .learning_rate = 0.01f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f};
}

// Weights and optimizer state on one context: the state of the optimizer
// in use is allocated (zeros), the others stay empty (as all four do when
// default-constructed).
struct TbeState {
  TbeState() = default;
  TbeState(engine::Engine& engine, const TbeTables& tables, Optimizer optimizer,
           const std::vector<float>& initial_weights, DType weight_dtype, engine::Context ctx)
      : weights(FromHost(engine, initial_weights, {tables.total_elements()}, ctx, weight_dtype)) {
    if (optimizer == Optimizer::kRowwiseAdagrad) {
      accumulator = FromHost(engine, std::vector<float>(tables.total_rows()), {tables.total_rows()},
                             ctx, DType::kF32);
    }
    if (optimizer == Optimizer::kAdam) {
      const std::vector<float> zeros(tables.total_elements());
      m = FromHost(engine, zeros, {tables.total_elements()}, ctx, DType::kF32);
      v = FromHost(engine, zeros, {tables.total_elements()}, ctx, DType::kF32);
    }
  }

  Tensor weights;
  Tensor accumulator;
  Tensor m;
  Tensor v;
};

// Pushes one backward step with `optimizer` (the Test* options).
inline void PushStep(Optimizer optimizer, const TbeTables& tables, TbeState& state,
                     const TbeBatch& batch, const Tensor& grad_output, int64_t step,
                     const TbeOptions& options) {
  switch (optimizer) {
    case Optimizer::kSgd:
      EmbeddingBagBackwardSgd(tables, state.weights, batch, grad_output, TestSgd(), options);
      return;
    case Optimizer::kRowwiseAdagrad:
      EmbeddingBagBackwardRowwiseAdagrad(tables, state.weights, state.accumulator, batch,
                                         grad_output, TestAdagrad(), options);
      return;
    case Optimizer::kAdam:
      EmbeddingBagBackwardAdam(tables, state.weights, state.m, state.v, batch, grad_output, step,
                               TestAdam(), options);
      return;
  }
}

}  // namespace ember::ops::testing
