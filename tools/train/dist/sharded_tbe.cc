#include "tools/train/dist/sharded_tbe.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

#include "engine/error.h"
#include "ops/elementwise.h"

namespace ember::train {

using storage::DType;
using storage::Tensor;

// One batch's tensors on this rank. Destroying them is safe at any time
// (a tensor's buffer outlives the ops pushed on it).
struct ShardedTbe::Step {
  int64_t number = 0;
  // On the host: the input's distribution.
  Tensor lengths_send, index_send, index_counts_send;  // PackInput's
  Tensor lengths_received, index_counts_received, indices_received;
  // On the rank's context: the owner's batch over the global examples,
  // its output [B, D_own], the exchanges' blocks.
  Tensor owner_offsets, owner_indices;
  Tensor owner_out;
  std::optional<cache::CacheLocations> locations;  // with a cache
  Tensor pooled_received;                          // owner by owner, [B_l, D_own(p)] each
  Tensor grads_send, owner_grads;                  // the backward's
};

namespace {

template <typename T>
std::span<T> Span(const Tensor& t) {
  return {t.data<std::remove_const_t<T>>(), static_cast<size_t>(t.numel())};
}

void CheckLocalBatch(const ops::TbeBatch& local, int64_t local_batch, int tables) {
  if (local.indices == nullptr || local.offsets == nullptr || local.per_sample_weights != nullptr ||
      local.batch_size != local_batch || local.indices->dtype() != DType::kI64 ||
      local.offsets->dtype() != DType::kI64 || local.offsets->numel() != tables * local_batch + 1) {
    throw InvalidArgument(
        fmt::format("[ShardedTbe::DistributeInput] the local batch must be {} examples of {} "
                    "tables, i64 indices and "
                    "offsets ({} entries), no per-sample weights",
                    local_batch, tables, tables * local_batch + 1));
  }
}

// The cache's options for this TBE's rows: f32 rows cached on `ctx`.
cache::CacheOptions CacheOn(cache::CacheOptions options, engine::Context ctx) {
  options.ctx = ctx;
  options.dtype = DType::kF32;
  return options;
}

// The owner's ops through the cache: sum pooling, deterministic; the
// owner's batch was checked where it was packed (ShardLayout::PackInput).
const ops::TbeOptions kOwnerOptions{
    .pooling = ops::Pooling::kSum, .validate = false, .deterministic = true};

}  // namespace

ShardedTbe::ShardedTbe(engine::Engine& engine, CollectiveOps& collectives,
                       const ShardLayout& layout, int rank,
                       const std::optional<cache::CacheOptions>& cache)
    : engine_(engine),
      collectives_(collectives),
      layout_(layout),
      rank_(rank),
      ctx_(collectives.ctx()),
      tables_(layout.OwnedTables(rank)),
      weights_(cache ? Tensor() : OnContext({tables_.total_elements()}, DType::kF32)),
      cache_(cache ? std::make_unique<cache::CachedTbe>(engine, tables_, CacheOn(*cache, ctx_))
                   : nullptr),
      pooled_(engine, layout, ctx_),
      lengths_sent_(Counts(layout.LengthsSent())),
      lengths_received_(Counts(layout.LengthsReceived(rank))),
      pooled_sent_(Counts(layout.PooledSent(rank))),
      pooled_received_(Counts(layout.PooledReceived())) {}

ShardedTbe::~ShardedTbe() = default;

Tensor ShardedTbe::Host(std::vector<int64_t> shape, DType dtype) {
  // Pinned where they go to and from a GPU, so that the copies run async.
  return Tensor::Empty(engine_, std::move(shape), dtype, engine::Context::CPU(),
                       ctx_.is_gpu() ? storage::MemoryKind::kPinned : storage::MemoryKind::kCpu);
}

Tensor ShardedTbe::OnContext(std::vector<int64_t> shape, DType dtype) {
  return Tensor::Empty(engine_, std::move(shape), dtype, ctx_);
}

Tensor ShardedTbe::CopyToContext(const Tensor& host) {
  Tensor there = OnContext(host.shape(), host.dtype());
  host.CopyTo(there);
  return there;
}

void ShardedTbe::AllToAllFromHost(const Tensor& send, const Tensor& send_counts, Tensor& recv,
                                  const Tensor& recv_counts, std::string what) {
  if (!ctx_.is_gpu()) {
    collectives_.AllToAllV(send, send_counts, recv, recv_counts, std::move(what));
    return;
  }
  // NCCL moves device memory: the host tensors go through the GPU, each
  // way a copy-worker op.
  const Tensor there = CopyToContext(send);
  const Tensor back = OnContext(recv.shape(), recv.dtype());
  collectives_.AllToAllV(there, send_counts, back, recv_counts, std::move(what));
  back.CopyTo(recv);
}

Tensor ShardedTbe::Counts(const std::vector<int64_t>& counts) {
  Tensor t = Host({static_cast<int64_t>(counts.size())}, DType::kI64);
  t.WaitToWrite();
  std::copy(counts.begin(), counts.end(), t.data<int64_t>());
  return t;
}

std::shared_ptr<ShardedTbe::Step> ShardedTbe::DistributeInput(const ops::TbeBatch& local) {
  std::shared_ptr<Step> step = ExchangeLengths(local);
  DistributeIndices(*step);
  return step;
}

std::shared_ptr<ShardedTbe::Step> ShardedTbe::ExchangeLengths(const ops::TbeBatch& local) {
  const ShardLayout& l = layout_;
  CheckLocalBatch(local, l.local_batch(), l.num_tables());
  auto step = std::make_shared<Step>();
  step->number = steps_++;
  PushPackInput(local, *step);
  step->lengths_received = Host({tables_.num_tables() * l.global_batch()}, DType::kI64);
  AllToAllFromHost(step->lengths_send, lengths_sent_, step->lengths_received, lengths_received_,
                   fmt::format("lengths of step {}", step->number));
  return step;
}

void ShardedTbe::DistributeIndices(Step& step) {
  // The one host wait: the lengths size the indices' buffers.
  step.lengths_received.WaitToRead();
  const std::vector<int64_t> counts =
      layout_.IndexCounts(rank_, Span<const int64_t>(step.lengths_received));
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  step.index_counts_received = Counts(counts);
  step.indices_received = Host({total}, DType::kI64);
  AllToAllFromHost(step.index_send, step.index_counts_send, step.indices_received,
                   step.index_counts_received, fmt::format("indices of step {}", step.number));
  PushUnpackInput(step);
}

ops::TbeBatch ShardedTbe::OwnerBatch(Step& step) const {
  return {&step.owner_indices, &step.owner_offsets, nullptr, layout_.global_batch()};
}

void ShardedTbe::Prefetch(Step& step) {
  if (!cache_ || step.locations) return;
  step.locations = cache_->NewLocations(std::max<int64_t>(step.owner_indices.numel(), 1));
  cache_->Prefetch(OwnerBatch(step), *step.locations);
}

void ShardedTbe::Lookup(Step& step, Tensor& out) {
  const ShardLayout& l = layout_;
  step.owner_out = OnContext({l.global_batch(), l.owned_dim(rank_)}, DType::kF32);
  const ops::TbeBatch owner = OwnerBatch(step);
  if (cache_) {
    Prefetch(step);
    cache_->Forward(owner, *step.locations, step.owner_out, kOwnerOptions);
  } else {
    ops::EmbeddingBagForward(tables_, weights_, owner, step.owner_out);
  }
  const std::vector<int64_t> pooled = l.PooledReceived();
  step.pooled_received =
      OnContext({std::accumulate(pooled.begin(), pooled.end(), int64_t{0})}, DType::kF32);
  collectives_.AllToAllV(step.owner_out, pooled_sent_, step.pooled_received, pooled_received_,
                         fmt::format("pooled rows of step {}", step.number));
  pooled_.Unpack(step.pooled_received, out);
}

void ShardedTbe::PushPackInput(const ops::TbeBatch& local, Step& step) {
  const int ranks = layout_.ranks();
  const std::vector<int64_t> lengths = layout_.LengthsSent();
  step.lengths_send =
      Host({std::accumulate(lengths.begin(), lengths.end(), int64_t{0})}, DType::kI64);
  step.index_send = Host({local.indices->numel()}, DType::kI64);
  step.index_counts_send = Host({ranks}, DType::kI64);
  engine_.PushSync(
      [&l = layout_, offsets = Span<const int64_t>(*local.offsets),
       indices = Span<const int64_t>(*local.indices), lengths = Span<int64_t>(step.lengths_send),
       send = Span<int64_t>(step.index_send), counts = Span<int64_t>(step.index_counts_send)](
          engine::RunContext) { l.PackInput(offsets, indices, lengths, send, counts); },
      {local.offsets->var(), local.indices->var()},
      {step.lengths_send.var(), step.index_send.var(), step.index_counts_send.var()},
      {.name = "ShardedTbe::PackInput"});
}

void ShardedTbe::PushUnpackInput(Step& step) {
  Tensor offsets = Host({tables_.num_tables() * layout_.global_batch() + 1}, DType::kI64);
  Tensor indices = Host({step.indices_received.numel()}, DType::kI64);
  engine_.PushSync(
      [&l = layout_, r = rank_, lengths = Span<const int64_t>(step.lengths_received),
       received = Span<const int64_t>(step.indices_received), to_offsets = Span<int64_t>(offsets),
       to_indices = Span<int64_t>(indices)](engine::RunContext) {
        l.UnpackInput(r, lengths, received, to_offsets, to_indices);
      },
      {step.lengths_received.var(), step.indices_received.var()}, {offsets.var(), indices.var()},
      {.name = "ShardedTbe::UnpackInput"});
  // The owner's batch where its lookup runs.
  step.owner_offsets = ctx_.is_gpu() ? CopyToContext(offsets) : std::move(offsets);
  step.owner_indices = ctx_.is_gpu() ? CopyToContext(indices) : std::move(indices);
}

ops::TbeBatch ShardedTbe::DistributeGrads(Step& step, const Tensor& grad_out) {
  const ShardLayout& l = layout_;
  step.grads_send = OnContext({step.pooled_received.numel()}, DType::kF32);
  pooled_.PackGrads(grad_out, step.grads_send);
  step.owner_grads = OnContext({l.global_batch(), l.owned_dim(rank_)}, DType::kF32);
  // The reverse of the output's exchange: its counts swap sides.
  collectives_.AllToAllV(step.grads_send, pooled_received_, step.owner_grads, pooled_sent_,
                         fmt::format("gradients of step {}", step.number));
  const ops::TbeBatch owner = OwnerBatch(step);
  // After any later batch's prefetch (the schedule pushed it already, if
  // at all) and before this backward: the cache's rule (docs/cache.md).
  if (cache_) cache_->Relookup(owner, *step.locations);
  return owner;
}

void ShardedTbe::BackwardSgd(Step& step, const Tensor& grad_out, const ops::SgdOptions& sgd) {
  const ops::TbeBatch owner = DistributeGrads(step, grad_out);
  if (cache_) {
    cache_->BackwardSgd(owner, *step.locations, step.owner_grads, sgd, kOwnerOptions);
  } else {
    ops::EmbeddingBagBackwardSgd(tables_, weights_, owner, step.owner_grads, sgd);
  }
}

void ShardedTbe::BackwardRowwiseAdagrad(Step& step, const Tensor& grad_out,
                                        const ops::RowwiseAdagradOptions& adagrad) {
  const ops::TbeBatch owner = DistributeGrads(step, grad_out);
  if (cache_) {
    cache_->BackwardRowwiseAdagrad(owner, *step.locations, step.owner_grads, adagrad,
                                   kOwnerOptions);
    return;
  }
  if (!accumulator_) accumulator_ = Zeros(tables_.total_rows());
  ops::EmbeddingBagBackwardRowwiseAdagrad(tables_, weights_, accumulator_, owner, step.owner_grads,
                                          adagrad);
}

void ShardedTbe::BackwardAdam(Step& step, const Tensor& grad_out, int64_t adam_step,
                              const ops::AdamOptions& adam) {
  const ops::TbeBatch owner = DistributeGrads(step, grad_out);
  if (cache_) {
    cache_->BackwardAdam(owner, *step.locations, step.owner_grads, adam_step, adam, kOwnerOptions);
    return;
  }
  if (!adam_m_) {
    adam_m_ = Zeros(tables_.total_elements());
    adam_v_ = Zeros(tables_.total_elements());
  }
  ops::EmbeddingBagBackwardAdam(tables_, weights_, adam_m_, adam_v_, owner, step.owner_grads,
                                adam_step, adam);
}

void ShardedTbe::Flush() {
  if (cache_) cache_->Flush();
}

Tensor ShardedTbe::Zeros(int64_t n) {
  Tensor t = OnContext({n}, DType::kF32);
  ops::Fill(t, 0.0f);
  return t;
}

}  // namespace ember::train
