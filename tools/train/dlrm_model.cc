#include "tools/train/dlrm_model.h"

#include <algorithm>
#include <cmath>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "engine/error.h"
#include "ops/elementwise.h"
#include "ops/loss.h"
#include "storage/half.h"
#include "tools/train/embedding_init.h"

namespace ember::train {
namespace {

using storage::DType;

cache::CacheOptions CacheOptionsFor(const ModelConfig& config, const ModelPlacement& placement) {
  cache::CacheOptions options = placement.cache;
  options.ctx = placement.ctx;
  options.dtype = config.embedding_dtype;
  return options;
}

// Writes the tables' initial rows (embedding_init.h) into the home
// (host-addressable).
void FillHome(const ModelConfig& config, const ops::TbeTables& tables, void* home) {
  const uint64_t seed = EmbeddingSeed(config.seed);
  const int64_t total = tables.total_elements();
  auto fill = [&](int64_t begin, int64_t end) {
    int t = 0;
    for (int64_t e = begin; e < end; ++e) {
      while (e >= tables.weight_offset(t + 1)) ++t;
      const float value = InitialEmbedding(seed, tables.rows(t), e);
      switch (config.embedding_dtype) {
        case DType::kF16:
          static_cast<uint16_t*>(home)[e] = storage::FloatToHalf(value);
          break;
        case DType::kBF16:
          static_cast<uint16_t*>(home)[e] = storage::FloatToBf16(value);
          break;
        default:
          static_cast<float*>(home)[e] = value;
      }
    }
  };
  // Large tables take seconds on one core: split them over the cores.
  const int64_t threads = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1,
                                              std::max<int64_t>(1, total >> 20));
  std::vector<std::thread> workers;
  for (int64_t i = 0; i < threads; ++i) {
    workers.emplace_back(fill, total * i / threads, total * (i + 1) / threads);
  }
  for (std::thread& worker : workers) worker.join();
}

const ModelConfig& Validated(const ModelConfig& config) {
  config.Validate();
  return config;
}

}  // namespace

DlrmModel::DlrmModel(engine::Engine& engine, const ModelConfig& config,
                     const ModelPlacement& placement)
    : engine_(engine),
      config_(Validated(config)),
      placement_(placement),
      tbe_(std::make_unique<cache::CachedTbe>(engine, config.tables(),
                                              CacheOptionsFor(config, placement))),
      dense_(engine, config_, placement.ctx, placement.dense_grad_slices) {}

void DlrmModel::Initialize() {
  dense_.Initialize(config_.seed);
  Tensor& home = tbe_->home();
  home.WaitToWrite();
  FillHome(config_, tbe_->tables(), home.data());
}

void DlrmModel::CheckBatch(const HostBatch& batch) const {
  static constexpr char kWhere[] = "[DlrmModel::CheckBatch]";
  const int64_t b = batch.batch_size;
  const int64_t t = config_.num_tables();
  if (b < 1 || !batch.dense || !batch.indices || !batch.offsets || !batch.labels) {
    throw InvalidArgument(fmt::format("{} a batch of {} examples with missing tensors", kWhere, b));
  }
  if (batch.dense.numel() != b * config_.num_dense || batch.offsets.numel() != t * b + 1 ||
      batch.labels.numel() != b) {
    throw InvalidArgument(
        fmt::format("{} the batch has {} dense values, {} offsets and {} labels for {} examples; "
                    "the model takes {} dense features and {} tables ({} offsets)",
                    kWhere, batch.dense.numel(), batch.offsets.numel(), batch.labels.numel(), b,
                    config_.num_dense, t, t * b + 1));
  }
  // The data is checked on the host, where it was made, so that a bad
  // index names its batch before any op runs (ops/embedding_bag.h,
  // "Validation"); the batch's tensors are ready (batch_source.h).
  if (placement_.check_batches) {
    const ops::TbeBatch host_view{&batch.indices, &batch.offsets, nullptr, b};
    ops::ValidateTbeBatch(tbe_->tables(), host_view);
  }
}

void DlrmModel::Upload(BatchState& state, const HostBatch& batch, bool checked) {
  if (!checked) CheckBatch(batch);
  dense_.Upload(state, batch);
  const int64_t n = batch.indices.numel();
  if (!state.locations || state.locations->capacity() < n) {
    state.locations = tbe_->NewLocations(std::max<int64_t>(n, 1));
  }
  state.prefetched = false;
  state.embedded = false;
}

ops::TbeBatch DlrmModel::TbeBatchOf(const BatchState& state) const {
  return ops::TbeBatch{&state.indices, &state.offsets, nullptr, state.examples};
}

ops::TbeOptions DlrmModel::TbeOptionsFor() const {
  ops::TbeOptions options;
  options.pooling = config_.pooling;
  // Checked on the host at Upload (and by the prefetch): the GPU check
  // kernels would only repeat it.
  options.validate = false;
  options.deterministic = placement_.deterministic;
  return options;
}

void DlrmModel::Prefetch(BatchState& state) {
  tbe_->Prefetch(TbeBatchOf(state), *state.locations);
  state.prefetched = true;
}

void DlrmModel::EmbeddingForward(BatchState& state) {
  // The lookup waits on the GPU for its batch's prefetch (on the copy-in
  // stream) and for the last embedding backward. fused and semisync push it
  // while the batch before still has dense ops to push: on a compute stream
  // its wait would hold them up (semisync's step ran 4.6 ms against
  // prefetch's 3.4, docs/benchmarks.md). The GPU priority workers' streams
  // carry nothing else of the step, and the forward that needs it comes next.
  ops::TbeOptions options = TbeOptionsFor();
  if (placement_.ctx.is_gpu()) options.property = engine::FnProperty::kGPUPrioritized;
  tbe_->Forward(TbeBatchOf(state), *state.locations, state.pooled, options);
  state.embedded = true;
}

void DlrmModel::DenseForward(BatchState& state) {
  dense_.Forward(state);
  // The one value the host reads each step, copied out by the copy workers.
  if (placement_.ctx.is_gpu()) state.loss.CopyTo(state.host_loss);
}

void DlrmModel::DenseBackward(BatchState& state) { dense_.Backward(state); }

void DlrmModel::Relookup(BatchState& state) { tbe_->Relookup(TbeBatchOf(state), *state.locations); }

void DlrmModel::EmbeddingBackward(BatchState& state) {
  const OptimizerConfig& o = config_.optimizer;
  const ops::TbeBatch batch = TbeBatchOf(state);
  switch (o.kind) {
    case Optimizer::kSgd:
      tbe_->BackwardSgd(batch, *state.locations, state.d_pooled, {.learning_rate = o.embedding_lr},
                        TbeOptionsFor());
      return;
    case Optimizer::kAdagrad:
      tbe_->BackwardRowwiseAdagrad(batch, *state.locations, state.d_pooled,
                                   {.learning_rate = o.embedding_lr, .eps = o.eps},
                                   TbeOptionsFor());
      return;
    case Optimizer::kAdam:
      tbe_->BackwardAdam(
          batch, *state.locations, state.d_pooled, state.step + 1,
          {.learning_rate = o.embedding_lr, .beta1 = o.beta1, .beta2 = o.beta2, .eps = o.eps},
          TbeOptionsFor());
      return;
  }
}

void DlrmModel::DenseUpdate(BatchState& state) { dense_.Update(config_.optimizer, state.step + 1); }

void DlrmModel::EvaluationForward(BatchState& state) {
  const ops::TbeBatch batch = TbeBatchOf(state);
  tbe_->LookupForInference(batch, *state.locations);
  tbe_->ForwardInference(batch, *state.locations, state.pooled, TbeOptionsFor());
  dense_.ForwardLogits(state);
  const Tensor& logits = state.top.out.back();
  ops::SigmoidBinaryCrossEntropy(logits, state.labels, state.loss, state.grad_logits);
  ops::Sigmoid(logits, state.probs);
  if (placement_.ctx.is_gpu()) state.loss.CopyTo(state.host_loss);
  state.probs.CopyTo(state.host_probs);
}

std::vector<engine::VarHandle> DlrmModel::StepOutputVars() const {
  std::vector<engine::VarHandle> vars = dense_.ParameterVars();
  vars.push_back(tbe_->home().var());
  vars.push_back(tbe_->slots().var());
  return vars;
}

const Tensor& DlrmModel::HostLoss(const BatchState& state) const {
  return placement_.ctx.is_gpu() ? state.host_loss : state.loss;
}

void DlrmModel::ForEachDenseState(const std::function<void(const std::string&, Tensor&)>& fn) {
  dense_.ForEachState(fn);
}

void DlrmModel::ForEachTableState(const std::function<void(const std::string&, Tensor&)>& fn) {
  switch (config_.optimizer.kind) {
    case Optimizer::kSgd:
      return;
    case Optimizer::kAdagrad:
      fn("tables.accumulator", tbe_->MakeAccumulator());
      return;
    case Optimizer::kAdam:
      tbe_->MakeAdamMoments();
      fn("tables.adam_m", tbe_->adam_m());
      fn("tables.adam_v", tbe_->adam_v());
      return;
  }
}

}  // namespace ember::train
