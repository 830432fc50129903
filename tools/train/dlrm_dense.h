#pragma once

// DlrmDense: the dense part of the DLRM-style model of model_config.h on
// one context: the bottom MLP over the dense features, the pairwise dot
// interaction of its output with the pooled embeddings, the top MLP and
// the sigmoid with binary cross-entropy. Whoever owns the embeddings
// (DlrmModel's CachedTbe, a rank's ShardedTbe) feeds BatchState::pooled
// and takes BatchState::d_pooled; everything here only pushes ops.
//
//   Forward   bottom MLP, concat, dots, concat, top MLP, loss
//             reads dense params, dense(i), pooled(i), labels(i)
//             writes activations(i), loss(i), grad_logits(i)
//   Backward  top MLP, split, dots, split, add, bottom MLP backward
//             reads activations(i), writes dense grads, d_pooled(i)
//   Update    the optimizer on every dense parameter
//
// Thread safety: one thread pushes (the pipeline's order is the push order).

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "tools/train/batch_state.h"
#include "tools/train/data/batch.h"
#include "tools/train/mlp.h"
#include "tools/train/model_config.h"

namespace ember::train {

class DlrmDense {
 public:
  // The MLPs' parameters on `ctx`, uninitialized until Initialize;
  // `grad_slices` as Mlp's (mlp.h, "Gradient slices"). REQUIRES: `engine`
  // outlives this object; `config` is valid (ModelConfig::Validate).
  DlrmDense(engine::Engine& engine, const ModelConfig& config, engine::Context ctx,
            int grad_slices);

  // The MLPs' initial values from the model's seed (the same bits on every
  // device and every rank).
  void Initialize(uint64_t seed);

  // Makes `state`'s activations and gradients for `batch` examples unless
  // it has them (a reused state keeps its tensors and their vars).
  void Shape(BatchState& state, int64_t batch);
  // Shape, then pushes the copies of `batch` (checked by the caller: its
  // tensors ready, of this model's shape) into state's dense, labels,
  // indices and offsets on this context, and sets its examples and
  // position. A reused state keeps its tensors where the shapes match, so
  // the engine orders the new batch after the old one's readers.
  void Upload(BatchState& state, const HostBatch& batch);
  // Upload without the indices and offsets, for an owner of the embeddings
  // that takes them from the host batch itself (ShardedDlrm).
  void UploadDense(BatchState& state, const HostBatch& batch);

  // The model's output logits of an uploaded batch (no loss).
  void ForwardLogits(BatchState& state);
  // ForwardLogits and the loss; its mean is over `mean_over` examples
  // (ops/loss.h; 0: the batch's own).
  void Forward(BatchState& state, int64_t mean_over = 0);
  void Backward(BatchState& state);
  // One optimizer step; `step` counts from 1.
  void Update(const OptimizerConfig& config, int64_t step);

  // Parameters and optimizer state, named, bottom MLP's first (Mlp::ForEachState).
  void ForEachState(const std::function<void(const std::string&, Tensor&)>& fn);
  // The gradients, named as their parameters, in the same order.
  void ForEachGradient(const std::function<void(const std::string&, Tensor&)>& fn);
  [[nodiscard]] std::vector<engine::VarHandle> ParameterVars() const;

 private:
  engine::Engine& engine_;
  const ModelConfig config_;
  const engine::Context ctx_;
  Mlp bottom_;
  Mlp top_;
};

}  // namespace ember::train
