#pragma once

// ShardedTbe: one rank's part of a sharded TBE (table-wise and row-wise
// shards), every step a push order of engine ops: the input distribution
// (lengths, then indices), the owner's forward over the global batch, the
// output distribution, and on the way back the gradients' distribution
// and the owner's fused backward with SGD, row-wise Adagrad or Adam
// (shard_layout.h says what moves where).
// On the CPU, table-wise sharding is bit-identical to one TBE over the
// concatenated batch; row-wise sharding too in its weights, and within
// float rounding in its pooled rows (the test checks both on every engine
// type). On a GPU the backward sums a row's gradient in chunks cut from the
// whole batch, which the owner's batch cuts elsewhere: within float
// rounding (docs/train.md, "On GPUs"). Sum pooling.
//
// One host wait per step: DistributeIndices waits for the lengths
// received, whose sums size the indices' buffers (TorchRec's input
// distribution waits for its splits the same way). Push the next batch's
// lengths before this batch's Lookup, and its indices after it, to hide
// the wait (a sparse-dist pipeline).
//
// Rows. The owned rows are a plain tensor, or, with CacheOptions, the home
// of a CachedTbe (cache/cached_tbe.h) whose cache keeps the hot rows: the
// owner's lookup is then the cache's prefetch and forward, its backward
// the relookup and the fused backward, over the owner's batch. The values
// are the same either way (the cache reads and updates each row where it
// is; the tests check the cached run against the unsharded trainer bit for
// bit).
//
// Data: on the context of the rank's collectives (collective_ops.h): the
// CPU, or the rank's GPU, where the owner's batch, its lookup, the pooled
// rows and their gradients live in device memory (NCCL's), and the input's
// distribution is packed and unpacked on the host (the local batch comes
// from the host; its lengths are needed there anyway) with its exchanges
// going through the GPU. The local batch is on the host; indices and
// offsets i64.
//
// Thread safety: one thread pushes a rank's steps; ranks are independent.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cache/cache_options.h"
#include "cache/cached_tbe.h"
#include "engine/engine.h"
#include "ops/embedding_bag.h"
#include "storage/tensor.h"
#include "tools/train/dist/collective_ops.h"
#include "tools/train/dist/pooled_exchange.h"
#include "tools/train/dist/shard_layout.h"

namespace ember::train {

class ShardedTbe {
 public:
  // One batch's tensors, from its ExchangeLengths to its backward (shared:
  // the type stays private to the .cc).
  struct Step;

  // REQUIRES: `engine`, `collectives` and `layout` outlive this object and
  // its ops; `collectives` is this rank's (its communicator's rank is
  // `rank`). The weights start uninitialized. With `cache` (its context
  // and dtype are this TBE's), the owned rows live behind a CachedTbe;
  // throws what CachedTbe throws (a cache smaller than one set). The
  // context is `collectives`'s.
  ShardedTbe(engine::Engine& engine, CollectiveOps& collectives, const ShardLayout& layout,
             int rank, const std::optional<cache::CacheOptions>& cache = std::nullopt);
  ~ShardedTbe();
  ShardedTbe(const ShardedTbe&) = delete;
  ShardedTbe& operator=(const ShardedTbe&) = delete;

  // The tables this rank owns, in table order, and their weights
  // ([total_elements] f32 of those tables; with a cache, its home): fill
  // them after WaitToWrite (through a copy where they are device memory),
  // read them after Flush.
  [[nodiscard]] const ops::TbeTables& tables() const { return tables_; }
  [[nodiscard]] storage::Tensor& weights() { return cache_ ? cache_->home() : weights_; }
  // The cache (null without one).
  [[nodiscard]] cache::CachedTbe* cache() { return cache_.get(); }
  // Writes the cached rows home (nothing without a cache).
  void Flush();

  // A step in three pushes, so that a pipeline can put other work between
  // them (the distribution reads no weights, so the result is the same):
  // ExchangeLengths pushes the packing of this rank's local batch (B_l
  // examples of every table) by owner and the exchange of its bags'
  // lengths, and returns at once; DistributeIndices waits for the lengths
  // received (the one host wait: they size the indices' buffers) and
  // pushes the indices' exchange and the owner's batch it makes;
  // DistributeInput does both. Lookup pushes the owner's forward and the
  // pooled rows' way back into `out` ([B_l, total_dim] f32). A sparse-dist
  // pipeline pushes batch i+1's lengths before batch i's lookup and its
  // indices after it, so that the host wait finds the GPU busy.
  // ExchangeLengths throws InvalidArgument for a batch of another size or
  // dtype; a bad index or offset is the packing op's error, which
  // DistributeIndices's wait rethrows.
  [[nodiscard]] std::shared_ptr<Step> ExchangeLengths(const ops::TbeBatch& local);
  void DistributeIndices(Step& step);
  [[nodiscard]] std::shared_ptr<Step> DistributeInput(const ops::TbeBatch& local);
  // With a cache, pushes the cache's prefetch of the owner's batch (after
  // DistributeIndices), once; Lookup pushes it where this was not called.
  // A pipeline pushes batch i+1's before batch i's backward, which then
  // follows it (the cache's rule: its Relookup comes after the next
  // prefetch), so that the rows' moves overlap batch i. Nothing without a
  // cache.
  void Prefetch(Step& step);
  void Lookup(Step& step, storage::Tensor& out);

  // Pushes the backward of `step` with `grad_out` ([B_l, total_dim] f32),
  // fused with SGD on the owned tables.
  void BackwardSgd(Step& step, const storage::Tensor& grad_out, const ops::SgdOptions& sgd);
  // The same fused with row-wise Adagrad or Adam (ops/embedding_bag.h),
  // whose state for the owned rows starts at zero on first use and lives
  // with the owner, as FBGEMM keeps it with the table. `adam_step` counts
  // from 1.
  void BackwardRowwiseAdagrad(Step& step, const storage::Tensor& grad_out,
                              const ops::RowwiseAdagradOptions& adagrad);
  void BackwardAdam(Step& step, const storage::Tensor& grad_out, int64_t adam_step,
                    const ops::AdamOptions& adam);

  // The owned rows' optimizer state (empty until its first backward):
  // row-wise Adagrad's accumulator [total_rows], Adam's moments
  // [total_elements], of tables().
  [[nodiscard]] const storage::Tensor& accumulator() const {
    return cache_ ? cache_->accumulator() : accumulator_;
  }
  [[nodiscard]] const storage::Tensor& adam_m() const {
    return cache_ ? cache_->adam_m() : adam_m_;
  }
  [[nodiscard]] const storage::Tensor& adam_v() const {
    return cache_ ? cache_->adam_v() : adam_v_;
  }

 private:
  [[nodiscard]] storage::Tensor Host(std::vector<int64_t> shape, storage::DType dtype);
  [[nodiscard]] storage::Tensor Counts(const std::vector<int64_t>& counts);
  // The owner's batch of `step` (over the global examples), once
  // DistributeIndices made it.
  [[nodiscard]] ops::TbeBatch OwnerBatch(Step& step) const;
  void PushPackInput(const ops::TbeBatch& local, Step& step);
  void PushUnpackInput(Step& step);
  // Pushes the gradients' way to the owners; the owner's batch of `step`
  // (with a cache, relooked up: its locations are current).
  [[nodiscard]] ops::TbeBatch DistributeGrads(Step& step, const storage::Tensor& grad_out);
  [[nodiscard]] storage::Tensor Zeros(int64_t n);
  [[nodiscard]] storage::Tensor OnContext(std::vector<int64_t> shape, storage::DType dtype);
  // A copy of `host` on this rank's GPU (pushed).
  [[nodiscard]] storage::Tensor CopyToContext(const storage::Tensor& host);
  // The all-to-all of host tensors, through the GPU's memory on a GPU.
  void AllToAllFromHost(const storage::Tensor& send, const storage::Tensor& send_counts,
                        storage::Tensor& recv, const storage::Tensor& recv_counts,
                        std::string what);

  engine::Engine& engine_;
  CollectiveOps& collectives_;
  const ShardLayout& layout_;
  const int rank_;
  const engine::Context ctx_;
  const ops::TbeTables tables_;
  storage::Tensor weights_;  // without a cache
  std::unique_ptr<cache::CachedTbe> cache_;
  PooledExchange pooled_;
  storage::Tensor accumulator_, adam_m_, adam_v_;
  // The constant counts of the lengths' and the pooled rows' exchanges.
  storage::Tensor lengths_sent_, lengths_received_, pooled_sent_, pooled_received_;
  int64_t steps_ = 0;
};

}  // namespace ember::train
