#include "tools/train/dlrm_dense.h"

#include <utility>

#include "ops/concat.h"
#include "ops/elementwise.h"
#include "ops/interaction.h"
#include "ops/loss.h"

namespace ember::train {
namespace {

// Seeds of the MLPs, as streams of config.seed (the tables' is 3:
// embedding_init.h).
constexpr uint64_t kBottomStream = 1;
constexpr uint64_t kTopStream = 2;

// Makes `tensor` a tensor of `shape` unless it is one already. A reused
// tensor keeps its var, so the engine orders the new batch's writes after
// the previous batch's reads.
void Ensure(engine::Engine& engine, Tensor& tensor, std::vector<int64_t> shape,
            storage::DType dtype, engine::Context ctx) {
  if (tensor && tensor.shape() == shape && tensor.dtype() == dtype) return;
  tensor = Tensor::Empty(engine, std::move(shape), dtype, ctx);
}

}  // namespace

DlrmDense::DlrmDense(engine::Engine& engine, const ModelConfig& config, engine::Context ctx,
                     int grad_slices)
    : engine_(engine),
      config_(config),
      ctx_(ctx),
      bottom_(engine, ctx, config.bottom_sizes(), /*relu_last=*/true, config.optimizer.kind,
              "bottom", grad_slices, config.matmul_precision),
      top_(engine, ctx, config.top_sizes(), /*relu_last=*/false, config.optimizer.kind, "top",
           grad_slices, config.matmul_precision) {}

void DlrmDense::Initialize(uint64_t seed) {
  bottom_.Initialize(ops::RandomBits(seed, kBottomStream));
  top_.Initialize(ops::RandomBits(seed, kTopStream));
}

void DlrmDense::Shape(BatchState& state, int64_t batch) {
  if (state.batch == batch) return;
  const int64_t t = config_.num_tables();
  const int64_t d = config_.embedding_dim;
  const int64_t pairs = config_.interaction_pairs();
  auto f32 = [&](std::vector<int64_t> shape) {
    return Tensor::Empty(engine_, std::move(shape), storage::DType::kF32, ctx_);
  };
  state.bottom = bottom_.NewActivations(batch);
  state.top = top_.NewActivations(batch);
  state.batch = batch;
  state.pooled = f32({batch, t * d});
  state.inter_in = f32({batch, t + 1, d});
  state.inter_out = f32({batch, pairs});
  state.top_in = f32({batch, d + pairs});
  state.loss = f32({1});
  state.grad_logits = f32({batch, 1});
  state.d_top_in = f32({batch, d + pairs});
  state.d_z = f32({batch, d});
  state.d_z_inter = f32({batch, d});
  state.d_inter_out = f32({batch, pairs});
  state.d_inter_in = f32({batch, t + 1, d});
  state.d_pooled = f32({batch, t * d});
  state.probs = f32({batch, 1});
  // Host copies: pinned memory on a GPU, so that the copies are DMAs.
  const auto host_kind = ctx_.is_gpu() ? storage::MemoryKind::kPinned : storage::MemoryKind::kCpu;
  state.host_loss =
      Tensor::Empty(engine_, {1}, storage::DType::kF32, engine::Context::CPU(), host_kind);
  state.host_probs =
      Tensor::Empty(engine_, {batch, 1}, storage::DType::kF32, engine::Context::CPU(), host_kind);
  if (!state.done) {
    state.done = Tensor::Empty(engine_, {1}, storage::DType::kI64, engine::Context::CPU());
  }
}

void DlrmDense::Upload(BatchState& state, const HostBatch& batch) {
  UploadDense(state, batch);
  Ensure(engine_, state.indices, {batch.indices.numel()}, storage::DType::kI64, ctx_);
  Ensure(engine_, state.offsets, {batch.offsets.numel()}, storage::DType::kI64, ctx_);
  batch.indices.CopyTo(state.indices);
  batch.offsets.CopyTo(state.offsets);
}

void DlrmDense::UploadDense(BatchState& state, const HostBatch& batch) {
  const int64_t b = batch.batch_size;
  Shape(state, b);
  Ensure(engine_, state.dense, {b, config_.num_dense}, storage::DType::kF32, ctx_);
  Ensure(engine_, state.labels, {b, 1}, storage::DType::kF32, ctx_);
  batch.dense.CopyTo(state.dense);
  batch.labels.CopyTo(state.labels);
  state.examples = b;
  state.position = batch.position;
}

void DlrmDense::ForwardLogits(BatchState& state) {
  bottom_.Forward(state.dense, state.bottom);
  const Tensor& z = state.bottom.out.back();
  ops::ConcatColumns({&z, &state.pooled}, state.inter_in);
  ops::DotInteraction(state.inter_in, state.inter_out);
  ops::ConcatColumns({&z, &state.inter_out}, state.top_in);
  top_.Forward(state.top_in, state.top);
}

void DlrmDense::Forward(BatchState& state, int64_t mean_over) {
  ForwardLogits(state);
  ops::SigmoidBinaryCrossEntropy(state.top.out.back(), state.labels, state.loss, state.grad_logits,
                                 mean_over);
}

void DlrmDense::Backward(BatchState& state) {
  top_.Backward(state.top_in, state.top, state.grad_logits, &state.d_top_in);
  ops::SplitColumns(state.d_top_in, {&state.d_z, &state.d_inter_out});
  ops::DotInteractionBackward(state.inter_in, state.d_inter_out, state.d_inter_in);
  ops::SplitColumns(state.d_inter_in, {&state.d_z_inter, &state.d_pooled});
  ops::Add(state.d_z, state.d_z_inter, state.d_z);
  bottom_.Backward(state.dense, state.bottom, state.d_z, nullptr);
}

void DlrmDense::Update(const OptimizerConfig& config, int64_t step) {
  bottom_.Update(config, step);
  top_.Update(config, step);
}

void DlrmDense::ForEachState(const std::function<void(const std::string&, Tensor&)>& fn) {
  bottom_.ForEachState(fn);
  top_.ForEachState(fn);
}

void DlrmDense::ForEachGradient(const std::function<void(const std::string&, Tensor&)>& fn) {
  bottom_.ForEachGradient(fn);
  top_.ForEachGradient(fn);
}

std::vector<engine::VarHandle> DlrmDense::ParameterVars() const {
  std::vector<engine::VarHandle> vars = bottom_.ParameterVars();
  for (engine::VarHandle var : top_.ParameterVars()) vars.push_back(var);
  return vars;
}

}  // namespace ember::train
