#pragma once

// ShardedDlrm: one rank's part of the DLRM-style model (dlrm_model.h)
// trained on G ranks, TorchRec's way: the embedding tables sharded over the
// ranks (ShardedTbe: model parallel), the dense part replicated (data
// parallel). Every rank holds the same MLP parameters and trains on its
// slice of each global batch of B = G * B_l examples (rank r: examples
// r * B_l .. (r + 1) * B_l - 1, SliceBatch below); the loss's mean is over
// B, and DenseUpdate sums the dense gradients over the ranks in rank order
// before the same optimizer step on every rank, so the replicas stay equal
// bit for bit.
//
// Stages of a step, each a few ops (a sharded schedule, sharded_schedule.h,
// is the order in which the stages of consecutive batches are pushed):
//   Upload(i)             the local batch into its tensors
//   ExchangeLengths(i)    the bags' lengths to the shards' owners
//   DistributeIndices(i)  then the indices (one host wait, for the
//                         lengths received: sharded_tbe.h)
//   Prefetch(i)           the embedding cache's prefetch of the owner's
//                         batch (Lookup pushes it where a schedule did not)
//   Lookup(i)             the owners' forward, the pooled rows back
//   DenseForward(i)       DlrmDense::Forward, mean over the global batch
//   DenseBackward(i)      DlrmDense::Backward
//   EmbeddingBackward(i)  the gradients to the owners, their fused optimizer
//   DenseUpdate(i)        AllReduceDense(i), the rank-order all-reduce of
//                         the loss and of every dense gradient, then
//                         DenseOptimizer(i), the dense optimizer's step
//
// Deterministic: on the CPU, with table-wise shards a run computes the
// bits of one DlrmModel over the global batches with dense_grad_slices =
// G, with an embedding cache on each rank or none
// (tests/train/dist/sharded_dlrm_test.cc); with row-wise shards, the pooled
// rows (and what depends on them) differ in the last bits
// (shard_layout.h). On GPUs the embedding backward rounds differently in
// the last bits (sharded_tbe.h; tests/train/dist/sharded_gpu_test.cc).
//
// Data: on the context of the rank's collectives (the CPU, or the rank's
// GPU), f32 tables, sum pooling (ShardedTbe's).
//
// Thread safety: one thread pushes a rank's stages; ranks are independent.

#include <cstdint>
#include <memory>
#include <optional>

#include "engine/engine.h"
#include "storage/tensor.h"
#include "tools/train/batch_state.h"
#include "tools/train/data/batch.h"
#include "tools/train/dist/collective_ops.h"
#include "tools/train/dist/shard_layout.h"
#include "tools/train/dist/sharded_tbe.h"
#include "tools/train/dlrm_dense.h"
#include "tools/train/model_config.h"

namespace ember::train {

// One local batch in flight on a rank.
struct ShardedBatch {
  BatchState state;  // the local batch's dense part and its tensors (no indices, no locations)
  // The local batch's indices and offsets, on the host, where the input's
  // distribution packs them (sharded_tbe.h).
  Tensor indices, offsets;
  std::shared_ptr<ShardedTbe::Step> dist;
  // What the schedule pushed ahead (sharded_schedule.h).
  bool lengths_sent = false;
  bool distributed = false;
  bool prefetched = false;
  bool embedded = false;
};

// Rank `rank`'s examples of `global` (batch size a multiple of `ranks`)
// as a host batch of its own. Throws InvalidArgument for a batch that does
// not split evenly, naming its size and the ranks.
HostBatch SliceBatch(engine::Engine& engine, const HostBatch& global, int rank, int ranks);

class ShardedDlrm {
 public:
  // Throws InvalidArgument for a config the sharded TBE cannot hold (not
  // f32 or not sum pooling) or tables that differ from `layout`'s. With
  // `cache`, the owned rows live behind an embedding cache (ShardedTbe).
  // REQUIRES: `engine`, `collectives` (this rank's) and `layout` outlive
  // this object and its ops.
  ShardedDlrm(engine::Engine& engine, CollectiveOps& collectives, const ShardLayout& layout,
              int rank, const ModelConfig& config,
              const std::optional<cache::CacheOptions>& cache = std::nullopt);

  // The MLPs' initial values and the owned rows', as one DlrmModel's of
  // the same seed (embedding_init.h). Waits for the owned rows.
  void Initialize();

  // The floats of a step's one all-reduce (DenseUpdate's: the loss and
  // every dense gradient), for a communicator that makes its scratch ahead
  // (NcclCommunicatorOptions::all_reduce_floats).
  static int64_t AllReduceFloats(const ModelConfig& config);

  [[nodiscard]] const ModelConfig& config() const { return config_; }
  [[nodiscard]] ShardedTbe& tbe() { return tbe_; }
  [[nodiscard]] DlrmDense& dense() { return dense_; }

  // The stages (see above). Upload takes the local batch's tensors (its
  // indices and offsets stay on the host) and throws InvalidArgument for a
  // batch that is not B_l examples of the model's shape.
  void Upload(ShardedBatch& batch, HostBatch local);
  void ExchangeLengths(ShardedBatch& batch);
  void DistributeIndices(ShardedBatch& batch);
  void Prefetch(ShardedBatch& batch);
  void Lookup(ShardedBatch& batch);
  void DenseForward(ShardedBatch& batch);
  void DenseBackward(ShardedBatch& batch);
  void EmbeddingBackward(ShardedBatch& batch);
  void DenseUpdate(ShardedBatch& batch);
  void AllReduceDense(ShardedBatch& batch);
  void DenseOptimizer(ShardedBatch& batch);

  // The global batch's mean loss once DenseUpdate(batch) ran (the ranks'
  // parts summed in rank order).
  [[nodiscard]] const storage::Tensor& Loss(const ShardedBatch& batch) const {
    return batch.state.loss;
  }

 private:
  engine::Engine& engine_;
  CollectiveOps& collectives_;
  const ShardLayout& layout_;
  const int rank_;
  const ModelConfig config_;
  ShardedTbe tbe_;
  DlrmDense dense_;
};

}  // namespace ember::train
