#pragma once

// DlrmModel: the DLRM-style model of model_config.h on one context, its
// embedding tables in a CachedTbe, and the stages of a training step, each
// a few ops pushed on the engine. A schedule (schedule.h) is the order in
// which the stages of consecutive batches are pushed; the stages and their
// vars are the same whatever the order, so the engine finds the overlap.
//
//   stage              ops                                       reads / writes (main vars)
//   Upload(i)          copies of the host batch                  host batch / batch(i)
//   Prefetch(i)        CachedTbe::Prefetch                       batch(i), home / state,
//   locations(i) EmbeddingForward(i) CachedTbe::Forward                       slots, home,
//   locations(i) / pooled(i) DenseForward(i)    bottom MLP, concat, dots, concat, top
//                      MLP, sigmoid + BCE (and the loss's copy)  dense params, pooled(i) /
//                      activations(i), loss(i)
//   DenseBackward(i)   top MLP, split, dots, split, add,
//                      bottom MLP backward                       activations(i) / dense grads,
//                      d_pooled(i)
//   Relookup(i)        CachedTbe::Relookup                       batch(i) / state, locations(i)
//   EmbeddingBackward(i) CachedTbe::Backward* (fused optimizer)  d_pooled(i), locations(i) / slots,
//   home, opt. state DenseUpdate(i)     the optimizer on every dense parameter    dense grads /
//   dense params
//
// Every stage only pushes; nothing here waits, except Initialize,
// LoadState and the reads of checkpoint.h.
//
// Thread safety: one thread pushes a model's stages, in its schedule's order.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cache/cache_options.h"
#include "cache/cached_tbe.h"
#include "engine/engine.h"
#include "tools/train/batch_state.h"
#include "tools/train/data/batch.h"
#include "tools/train/dlrm_dense.h"
#include "tools/train/model_config.h"

namespace ember::train {

// Where the model lives and how its cache is sized.
struct ModelPlacement {
  engine::Context ctx = engine::Context::CPU();
  // The cache's sizing, policy and passes; ctx and dtype are the model's,
  // and Trainer gives a link_warps of 0 the schedule's (LinkWarpsFor).
  cache::CacheOptions cache;
  // Asks the TBE for run-to-run identical backward passes (ops/embedding_bag.h:
  // always given; kept so that a deterministic run states it).
  bool deterministic = true;
  // Checks each batch's indices and offsets on the host at Upload, where a
  // bad one names its batch before any op runs (ops/embedding_bag.h,
  // "Validation"): one pass over the batch. Off, the cache's prefetch
  // checks them as it runs, and its error reaches the trainer through the
  // step markers (trainer.h, "Errors").
  bool check_batches = true;
  // Sums the dense gradients over this many equal slices of each batch, in
  // slice order (mlp.h, "Gradient slices"): as G data-parallel ranks do,
  // so that this model reproduces a G-rank run bit for bit (docs/train.md,
  // "Several GPUs"). Every batch must split evenly. 1: no slices.
  int dense_grad_slices = 1;
};

class DlrmModel {
 public:
  // Allocates every parameter (uninitialized: call Initialize or
  // LoadState). Throws InvalidArgument for a bad config or cache, and what
  // CachedTbe and Tensor::Empty throw. REQUIRES: `engine` outlives the
  // model.
  DlrmModel(engine::Engine& engine, const ModelConfig& config, const ModelPlacement& placement);
  DlrmModel(const DlrmModel&) = delete;
  DlrmModel& operator=(const DlrmModel&) = delete;

  // Initial weights from config().seed: the MLPs' by ops, the tables' on
  // the host (uniform in +-sqrt(1 / rows) per table, DLRM's; the bits of
  // ops::RandomUniform). Waits for the home rows to be writable.
  void Initialize();

  [[nodiscard]] const ModelConfig& config() const { return config_; }
  [[nodiscard]] const ModelPlacement& placement() const { return placement_; }
  [[nodiscard]] engine::Engine& engine() const { return engine_; }
  [[nodiscard]] cache::CachedTbe& tbe() { return *tbe_; }

  // Checks a batch on the host before it is uploaded: its tensors' sizes
  // against the model, and (placement().check_batches) its indices and
  // offsets against the tables (ops::ValidateTbeBatch). Throws
  // InvalidArgument. Thread-safe: it reads the batch and the model's shape
  // only, so a loader's threads run it on the batches they make (Trainer
  // does), off the training thread, where a GPU preset batch's check took
  // 2.6 ms of a 3.4 ms step (docs/benchmarks.md, Train).
  void CheckBatch(const HostBatch& batch) const;

  // The stages (see the table above). Upload runs CheckBatch first unless
  // `checked` says it ran on this batch already.
  void Upload(BatchState& state, const HostBatch& batch, bool checked = false);
  void Prefetch(BatchState& state);
  void EmbeddingForward(BatchState& state);
  void DenseForward(BatchState& state);
  void DenseBackward(BatchState& state);
  void Relookup(BatchState& state);
  void EmbeddingBackward(BatchState& state);
  void DenseUpdate(BatchState& state);

  // Evaluation of an uploaded batch, forward only, with the cache's
  // inference lookup (no locks, no inserts): fills state.loss (the batch's
  // mean loss) and state.probs, and their host copies. REQUIRES: no
  // training batch in flight (the pipeline drained).
  void EvaluationForward(BatchState& state);

  // The vars a step's last ops write: dense parameters, home rows and
  // slots. A marker op reading them runs after the whole step.
  [[nodiscard]] std::vector<engine::VarHandle> StepOutputVars() const;
  // The host tensor holding the loss of `state` once its forward ran.
  [[nodiscard]] const Tensor& HostLoss(const BatchState& state) const;

  // Every dense parameter and optimizer state, named, in a fixed order
  // (Mlp::ForEachState: the bottom MLP's, then the top's).
  void ForEachDenseState(const std::function<void(const std::string&, Tensor&)>& fn);
  // The tables' optimizer state ("tables.accumulator" for Adagrad,
  // "tables.adam_m" and "tables.adam_v" for Adam; none for SGD). Where the
  // cache has not made them yet (no backward ran), they are made here,
  // zeroed, in memory of the home's kind, so that a checkpoint can be
  // loaded into them before the first backward.
  void ForEachTableState(const std::function<void(const std::string&, Tensor&)>& fn);

 private:
  [[nodiscard]] ops::TbeBatch TbeBatchOf(const BatchState& state) const;
  [[nodiscard]] ops::TbeOptions TbeOptionsFor() const;

  engine::Engine& engine_;
  const ModelConfig config_;
  const ModelPlacement placement_;
  std::unique_ptr<cache::CachedTbe> tbe_;
  DlrmDense dense_;
};

}  // namespace ember::train
