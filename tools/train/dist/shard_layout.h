#pragma once

// ShardLayout: how a sharded TBE's data moves between ranks, as plain
// functions over host arrays (the ops of sharded_tbe.h call them).
//
// Each of G ranks holds a local batch of B_l examples for all T tables (a
// TBE batch: offsets [T * B_l + 1], table-major). A shard is a range of
// one table's rows on one rank: a table-wise table is one shard of all its
// rows on its owner, a row-wise table one shard per rank (ShardPlan's
// ranges). Rank r owns its shards S_r in table order and looks them up for
// the global batch of B = G * B_l examples, rank p's examples being global
// examples p * B_l .. (p + 1) * B_l - 1 (TorchRec's data-parallel input).
// The moves, each an all-to-all:
//   input:  rank r sends owner p, for each shard of S_p and each local bag,
//           how many of the bag's indices fall in the shard's rows, then
//           those indices, as rows of the shard (PackInput); the owner
//           makes its batch of the global bags (UnpackInput);
//   output: the owner's pooled rows [B, D_own] go back by example: rows of
//           rank p to rank p, contiguous (no packing); rank p adds each
//           owner's columns into its tables' output columns, owners in
//           rank order (UnpackPooled);
//   grads:  rank r sends owner p its grad columns of the tables of p's
//           shards (PackGrads); the owner receives [B, D_own] in global
//           example order, contiguous.
// Why table-major over the global batch: the owner's batch lists a shard's
// bags in global example order, entries in their order, as one TBE over
// the concatenated batch would. A table-wise table's forward sums and
// every table's per-row backward sums therefore run in the same order as
// one TBE's: table-wise sharding is bit-identical to one TBE, row-wise
// sharding in its weights (its pooled rows are sums of the owners' partial
// sums, which differ from one TBE's in the last bits). Sum pooling only:
// a row-wise owner sees part of a bag, not its length.
//
// Thread safety: plain values and pure functions.

#include <cstdint>
#include <span>
#include <vector>

#include "ops/embedding_bag.h"
#include "tools/train/dist/shard_plan.h"

namespace ember::train {

class ShardLayout {
 public:
  struct Shard {
    int table;
    int64_t row_begin;  // the shard's rows of the table: [row_begin, row_end)
    int64_t row_end;
  };

  // Throws InvalidArgument when the plan does not match `tables`, a
  // row-wise table has fewer rows than ranks, or a rank owns no shard.
  ShardLayout(const ShardPlan& plan, const ops::TbeTables& tables, int64_t local_batch);

  [[nodiscard]] int ranks() const { return static_cast<int>(shards_.size()); }
  [[nodiscard]] int num_tables() const { return tables_.num_tables(); }
  [[nodiscard]] int64_t total_dim() const { return tables_.total_dim(); }
  [[nodiscard]] int64_t dim(int table) const { return tables_.dim(table); }
  [[nodiscard]] int64_t local_batch() const { return local_batch_; }
  [[nodiscard]] int64_t global_batch() const { return local_batch_ * ranks(); }
  // The shards rank r owns, in table order, and their columns.
  [[nodiscard]] const std::vector<Shard>& shards(int r) const { return shards_[r]; }
  [[nodiscard]] int64_t owned_dim(int r) const { return owned_dim_[r]; }
  // Owner r's TBE: a table per shard, in order.
  [[nodiscard]] ops::TbeTables OwnedTables(int r) const;

  // The lengths rank r sends each owner (|S_p| * B_l) and receives from
  // each rank (|S_r| * B_l), per rank.
  [[nodiscard]] std::vector<int64_t> LengthsSent() const;
  [[nodiscard]] std::vector<int64_t> LengthsReceived(int r) const;
  // The pooled (and gradient) elements rank r sends each rank and
  // receives from each owner, per rank.
  [[nodiscard]] std::vector<int64_t> PooledSent(int r) const;
  [[nodiscard]] std::vector<int64_t> PooledReceived() const;
  // Rank r's local batch (offsets [T * B_l + 1]) into what it sends,
  // once it is checked as the TBE ops check theirs (InvalidArgument naming
  // the table, the bag and the offset or index: an index outside its table
  // would fall in no shard and be lost):
  // lengths (LengthsSent's counts, owner by owner) and indices (rows of
  // their shards; each index goes to exactly one shard, so there are as
  // many as the batch has), and the indices' count per owner.
  void PackInput(std::span<const int64_t> offsets, std::span<const int64_t> indices,
                 std::span<int64_t> lengths, std::span<int64_t> send_indices,
                 std::span<int64_t> index_counts) const;
  // Per source rank, the indices the lengths received announce.
  [[nodiscard]] std::vector<int64_t> IndexCounts(int r, std::span<const int64_t> lengths) const;
  // Owner r's batch over the global examples: offsets [|S_r| * B + 1] and
  // indices, from the received lengths and indices.
  void UnpackInput(int r, std::span<const int64_t> lengths, std::span<const int64_t> indices,
                   std::span<int64_t> offsets, std::span<int64_t> owner_indices) const;
  // The pooled blocks received (owner by owner, [B_l, D_own(p)] each) into
  // rank r's output [B_l, total_dim], summed over a row-wise table's owners
  // in rank order.
  void UnpackPooled(std::span<const float> received, std::span<float> out) const;
  // Rank r's grad rows [B_l, total_dim] into the blocks it sends each owner.
  void PackGrads(std::span<const float> grads, std::span<float> send) const;

  // UnpackPooled and PackGrads as a table of columns, for kernels that do
  // the same per element (pooled_exchange.h). The exchanged blocks,
  // owners in rank order, have W = sum of D_own(p) columns in all; owner p's
  // are [first_column[p], first_column[p + 1]).
  struct ColumnPlan {
    std::vector<int32_t> first_column;  // [G + 1]
    std::vector<int32_t> owner;         // [W]: the owner of each exchanged column
    std::vector<int32_t> out_column;    // [W]: the output column it belongs to
    // Per output column c, the exchanged columns that add up to it, in
    // rank order (the first is copied, the others added, as UnpackPooled):
    // sources[sources_begin[c] .. sources_begin[c + 1]).
    std::vector<int32_t> sources_begin;  // [total_dim + 1]
    std::vector<int32_t> sources;        // [W]
  };
  [[nodiscard]] ColumnPlan Columns() const;

 private:
  void CheckLocalBatch(std::span<const int64_t> offsets, std::span<const int64_t> indices) const;

  ops::TbeTables tables_;
  int64_t local_batch_;
  std::vector<std::vector<Shard>> shards_;  // per rank
  std::vector<int64_t> owned_dim_;          // per rank
};

}  // namespace ember::train
