#pragma once

// TableWiseLayout: how a table-wise sharded TBE's data moves between ranks,
// as plain functions over host arrays (the ops of sharded_tbe.h call them).
//
// Each of G ranks holds a local batch of B_l examples for all T tables (a
// TBE batch: offsets [T * B_l + 1], table-major). Table t lives whole on
// its owner; owner r holds its tables O_r in table order and looks them up
// for the global batch of B = G * B_l examples, rank p's examples being
// global examples p * B_l .. (p + 1) * B_l - 1 (TorchRec's data-parallel
// input). The moves, each an all-to-all:
//   input:  rank r sends owner p, for each table of O_p and each local bag,
//           the bag's length, then its indices (PackInput); the owner makes
//           its batch of the global bags (UnpackInput);
//   output: the owner's pooled rows [B, D_own] go back by example: rows of
//           rank p to rank p, contiguous (no packing); rank p places each
//           owner's columns at its tables' output offsets (UnpackPooled);
//   grads:  the reverse of the output: rank r sends owner p the columns of
//           p's tables of its grad rows (PackGrads); the owner receives
//           [B, D_own] in global example order, contiguous.
// Why table-major over the global batch: the owner's batch lists a table's
// bags in global example order, entries in their order, as the unsharded
// TBE over the concatenated batch would; its forward sums and its
// backward's per-row sums run in the same order, so table-wise sharding is
// bit-identical to one TBE.
//
// Thread safety: plain values and pure functions.

#include <cstdint>
#include <span>
#include <vector>

#include "ops/embedding_bag.h"
#include "tools/train/dist/shard_plan.h"

namespace ember::train {

class TableWiseLayout {
 public:
  // Throws InvalidArgument when a table of `plan` is row-wise, the plan does
  // not match `tables`, or a rank owns no table (each must own one).
  TableWiseLayout(const ShardPlan& plan, const ops::TbeTables& tables, int64_t local_batch);

  [[nodiscard]] int ranks() const { return static_cast<int>(owned_.size()); }
  [[nodiscard]] int num_tables() const { return tables_.num_tables(); }
  [[nodiscard]] int64_t total_dim() const { return tables_.total_dim(); }
  [[nodiscard]] int64_t local_batch() const { return local_batch_; }
  [[nodiscard]] int64_t global_batch() const { return local_batch_ * ranks(); }
  // The tables rank r owns, in table order, and their columns.
  [[nodiscard]] const std::vector<int>& owned(int r) const { return owned_[r]; }
  [[nodiscard]] int64_t owned_dim(int r) const { return owned_dim_[r]; }
  // Owner r's TBE: its tables, in table order.
  [[nodiscard]] ops::TbeTables OwnedTables(int r) const;

  // The lengths rank r sends each owner (|O_p| * B_l) and receives from
  // each rank (|O_r| * B_l), per rank.
  [[nodiscard]] std::vector<int64_t> LengthsSent() const;
  [[nodiscard]] std::vector<int64_t> LengthsReceived(int r) const;
  // The pooled (and gradient) elements rank r sends each rank and
  // receives from each owner, per rank.
  [[nodiscard]] std::vector<int64_t> PooledSent(int r) const;
  [[nodiscard]] std::vector<int64_t> PooledReceived() const;

  // Rank r's local batch (offsets [T * B_l + 1]) into what it sends:
  // lengths (LengthsSent's counts, owner by owner) and indices, and the
  // indices' count per owner.
  void PackInput(std::span<const int64_t> offsets, std::span<const int64_t> indices,
                 std::span<int64_t> lengths, std::span<int64_t> send_indices,
                 std::span<int64_t> index_counts) const;
  // Per source rank, the indices the lengths received announce.
  [[nodiscard]] std::vector<int64_t> IndexCounts(int r, std::span<const int64_t> lengths) const;
  // Owner r's batch over the global examples: offsets [|O_r| * B + 1] and
  // indices, from the received lengths and indices.
  void UnpackInput(int r, std::span<const int64_t> lengths, std::span<const int64_t> indices,
                   std::span<int64_t> offsets, std::span<int64_t> owner_indices) const;
  // The pooled blocks received (owner by owner, [B_l, D_own(p)] each) into
  // rank r's output [B_l, total_dim].
  void UnpackPooled(std::span<const float> received, std::span<float> out) const;
  // Rank r's grad rows [B_l, total_dim] into the blocks it sends each owner.
  void PackGrads(std::span<const float> grads, std::span<float> send) const;

 private:
  ops::TbeTables tables_;
  int64_t local_batch_;
  std::vector<std::vector<int>> owned_;  // per rank
  std::vector<int64_t> owned_dim_;       // per rank
};

}  // namespace ember::train
