#include "tools/train/dist/sharded_dlrm.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "engine/error.h"
#include "tools/train/embedding_init.h"

namespace ember::train {
namespace {

using storage::DType;
using storage::Tensor;

const ModelConfig& Checked(const ModelConfig& config, const ShardLayout& layout) {
  config.Validate();
  if (config.embedding_dtype != DType::kF32 || config.pooling != ops::Pooling::kSum) {
    throw InvalidArgument(
        "[ShardedDlrm] sharded tables are f32 with sum pooling (ShardedTbe); the model asks for "
        "another dtype or pooling");
  }
  if (layout.num_tables() != config.num_tables() ||
      layout.total_dim() != config.num_tables() * config.embedding_dim) {
    throw InvalidArgument(fmt::format(
        "[ShardedDlrm] the shard layout has {} tables of {} columns in all; the model {} of {}",
        layout.num_tables(), layout.total_dim(), config.num_tables(),
        config.num_tables() * config.embedding_dim));
  }
  return config;
}

Tensor HostTensor(engine::Engine& engine, std::vector<int64_t> shape, DType dtype) {
  Tensor t = Tensor::Empty(engine, std::move(shape), dtype, engine::Context::CPU());
  t.WaitToWrite();
  return t;
}

}  // namespace

HostBatch SliceBatch(engine::Engine& engine, const HostBatch& global, int rank, int ranks) {
  const int64_t b = global.batch_size;
  if (ranks < 1 || rank < 0 || rank >= ranks || b % ranks != 0) {
    throw InvalidArgument(fmt::format(
        "[SliceBatch] rank {} of {}: a batch of {} examples splits into equal slices only over "
        "a number of ranks that divides it",
        rank, ranks, b));
  }
  const int64_t local = b / ranks;
  const int64_t first = rank * local;
  const int64_t dense = global.dense.numel() / b;
  const int64_t tables = (global.offsets.numel() - 1) / b;
  global.dense.WaitToRead();
  global.labels.WaitToRead();
  global.offsets.WaitToRead();
  global.indices.WaitToRead();
  const int64_t* offsets = global.offsets.data<int64_t>();
  const int64_t* indices = global.indices.data<int64_t>();
  std::vector<int64_t> out_offsets = {0}, out_indices;
  for (int64_t t = 0; t < tables; ++t) {
    for (int64_t e = first; e < first + local; ++e) {
      out_indices.insert(out_indices.end(), indices + offsets[t * b + e],
                         indices + offsets[t * b + e + 1]);
      out_offsets.push_back(static_cast<int64_t>(out_indices.size()));
    }
  }
  HostBatch out;
  out.batch_size = local;
  out.position = global.position;
  out.dense = HostTensor(engine, {local, dense}, DType::kF32);
  std::copy_n(global.dense.data<float>() + first * dense, local * dense, out.dense.data<float>());
  out.labels = HostTensor(engine, {local}, DType::kF32);
  std::copy_n(global.labels.data<float>() + first, local, out.labels.data<float>());
  out.offsets = HostTensor(engine, {static_cast<int64_t>(out_offsets.size())}, DType::kI64);
  std::ranges::copy(out_offsets, out.offsets.data<int64_t>());
  out.indices = HostTensor(engine, {static_cast<int64_t>(out_indices.size())}, DType::kI64);
  std::ranges::copy(out_indices, out.indices.data<int64_t>());
  return out;
}

ShardedDlrm::ShardedDlrm(engine::Engine& engine, CollectiveOps& collectives,
                         const ShardLayout& layout, int rank, const ModelConfig& config,
                         const std::optional<cache::CacheOptions>& cache)
    : engine_(engine),
      collectives_(collectives),
      layout_(layout),
      rank_(rank),
      config_(Checked(config, layout)),
      tbe_(engine, collectives, layout, rank, cache),
      dense_(engine, config_, collectives.ctx(), /*grad_slices=*/1) {}

void ShardedDlrm::Initialize() {
  dense_.Initialize(config_.seed);
  const ops::TbeTables all = config_.tables();
  const ops::TbeTables& owned = tbe_.tables();
  const uint64_t seed = EmbeddingSeed(config_.seed);
  Tensor& weights = tbe_.weights();
  // Written on the host: in place where the rows are host-addressable (a
  // cache's home), else through a host copy.
  const bool direct = weights.kind() != storage::MemoryKind::kDevice;
  Tensor staged;
  if (!direct) staged = HostTensor(engine_, weights.shape(), DType::kF32);
  Tensor& host = direct ? weights : staged;
  host.WaitToWrite();
  for (int j = 0; j < owned.num_tables(); ++j) {
    const ShardLayout::Shard& shard = layout_.shards(rank_)[j];
    const int64_t first = all.weight_offset(shard.table) + shard.row_begin * owned.dim(j);
    for (int64_t e = 0; e < owned.rows(j) * owned.dim(j); ++e) {
      host.data<float>()[owned.weight_offset(j) + e] =
          InitialEmbedding(seed, all.rows(shard.table), first + e);
    }
  }
  if (!direct) staged.CopyTo(weights);
  weights.WaitToRead();
}

void ShardedDlrm::Upload(ShardedBatch& batch, HostBatch local) {
  const int64_t b = layout_.local_batch();
  const int64_t t = config_.num_tables();
  if (local.batch_size != b || !local.dense || !local.indices || !local.offsets || !local.labels ||
      local.dense.numel() != b * config_.num_dense || local.offsets.numel() != t * b + 1 ||
      local.labels.numel() != b) {
    throw InvalidArgument(fmt::format(
        "[ShardedDlrm::Upload] rank {}: a local batch of {} examples; the model takes {} "
        "examples of {} dense features and {} tables ({} offsets)",
        rank_, local.batch_size, b, config_.num_dense, t, t * b + 1));
  }
  dense_.UploadDense(batch.state, local);
  batch.indices = std::move(local.indices);
  batch.offsets = std::move(local.offsets);
  batch.dist.reset();
  batch.lengths_sent = false;
  batch.distributed = false;
  batch.prefetched = false;
  batch.embedded = false;
}

void ShardedDlrm::ExchangeLengths(ShardedBatch& batch) {
  batch.dist = tbe_.ExchangeLengths(
      ops::TbeBatch{&batch.indices, &batch.offsets, nullptr, layout_.local_batch()});
  batch.lengths_sent = true;
}

void ShardedDlrm::DistributeIndices(ShardedBatch& batch) {
  tbe_.DistributeIndices(*batch.dist);
  batch.distributed = true;
}

void ShardedDlrm::Prefetch(ShardedBatch& batch) {
  tbe_.Prefetch(*batch.dist);
  batch.prefetched = true;
}

void ShardedDlrm::Lookup(ShardedBatch& batch) {
  tbe_.Lookup(*batch.dist, batch.state.pooled);
  batch.embedded = true;
}

void ShardedDlrm::DenseForward(ShardedBatch& batch) {
  dense_.Forward(batch.state, layout_.global_batch());
}

void ShardedDlrm::DenseBackward(ShardedBatch& batch) { dense_.Backward(batch.state); }

void ShardedDlrm::EmbeddingBackward(ShardedBatch& batch) {
  const OptimizerConfig& o = config_.optimizer;
  ShardedTbe::Step& step = *batch.dist;
  const Tensor& grads = batch.state.d_pooled;
  switch (o.kind) {
    case Optimizer::kSgd:
      tbe_.BackwardSgd(step, grads, {.learning_rate = o.embedding_lr});
      return;
    case Optimizer::kAdagrad:
      tbe_.BackwardRowwiseAdagrad(step, grads, {.learning_rate = o.embedding_lr, .eps = o.eps});
      return;
    case Optimizer::kAdam:
      tbe_.BackwardAdam(
          step, grads, batch.state.step + 1,
          {.learning_rate = o.embedding_lr, .beta1 = o.beta1, .beta2 = o.beta2, .eps = o.eps});
      return;
  }
}

int64_t ShardedDlrm::AllReduceFloats(const ModelConfig& config) {
  return 1 + config.dense_parameters();
}

void ShardedDlrm::DenseUpdate(ShardedBatch& batch) {
  AllReduceDense(batch);
  DenseOptimizer(batch);
}

void ShardedDlrm::AllReduceDense(ShardedBatch& batch) {
  // One collective for the loss and every gradient (DDP's bucket): one
  // round trip a step.
  std::vector<const Tensor*> bucket = {&batch.state.loss};
  dense_.ForEachGradient([&](const std::string&, Tensor& grad) { bucket.push_back(&grad); });
  collectives_.AllReduceSum(bucket, fmt::format("loss and gradients of step {}", batch.state.step));
}

void ShardedDlrm::DenseOptimizer(ShardedBatch& batch) {
  dense_.Update(config_.optimizer, batch.state.step + 1);
}

}  // namespace ember::train
