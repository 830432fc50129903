#pragma once

// ShardPlan: where each embedding table of a model lives over G GPUs, as
// TorchRec shards them: a table is either table-wise (all its rows on one
// GPU) or row-wise (rows split into G contiguous ranges, range g on GPU g).
// A plan comes from the planner (shard_planner.h) or from the user
// (ParseShardPlan), and is checked against the tables and the GPUs'
// memory before any work (CheckShardPlan).
//
// What a shard costs, per GPU: the bytes of its rows that must be resident
// there (ShardingTable::resident_bytes: the whole shard without a cache, the
// cache's share of it with one) and its expected lookups per batch times the
// table's dim (the work of its forward and backward). Row-wise shards are
// assumed to take lookups in proportion to their rows (indices spread over
// the rows, as hashed ids are).
//
// Thread safety: plain values and pure functions.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ember::train {

// What the plan needs to know of one table.
struct ShardingTable {
  int64_t rows = 0;
  int64_t dim = 0;
  // Bytes a row keeps resident on its GPU (weights and optimizer state,
  // times the cache's load factor when the rows live in host memory).
  double resident_bytes_per_row = 0;
  double lookups_per_batch = 0;  // expected indices a batch looks up
};

enum class ShardKind { kTableWise, kRowWise };

struct TableShard {
  ShardKind kind = ShardKind::kTableWise;
  int gpu = 0;  // table-wise: the GPU that holds every row
  // Rows of each GPU (row-wise: G ranges; table-wise: the one GPU's).
  [[nodiscard]] std::vector<int64_t> RowsPerGpu(int64_t rows, int num_gpus) const;
};

struct ShardPlan {
  int num_gpus = 1;
  std::vector<TableShard> tables;  // one per table, in table order
};

// A GPU's share of a plan.
struct GpuLoad {
  double resident_bytes = 0;
  double lookup_work = 0;  // expected lookups per batch x dim
};

// Adds `shard`'s part of `table` to each GPU's load (`loads`: one a GPU).
void AddShardLoads(const TableShard& shard, const ShardingTable& table,
                   std::vector<GpuLoad>& loads);

// Each GPU's load under `plan`. `tables` must match the plan's size.
std::vector<GpuLoad> GpuLoads(const ShardPlan& plan, const std::vector<ShardingTable>& tables);

// Throws InvalidArgument "[CheckShardPlan] ..." when `plan` does not fit:
// a plan for another number of tables or GPUs, a GPU out of range, or a
// GPU whose resident bytes exceed its budget (naming the GPU, its bytes,
// its budget and the tables on it). `gpu_budget_bytes` has one entry per GPU.
void CheckShardPlan(const ShardPlan& plan, const std::vector<ShardingTable>& tables,
                    const std::vector<double>& gpu_budget_bytes);

// A user's plan: comma-separated "table:gpu" (table-wise on that GPU) or
// "table:row" (row-wise over every GPU), each table exactly once, e.g.
// "0:1,1:row,2:0". Throws InvalidArgument "[ParseShardPlan] ..." naming
// the entry at fault.
ShardPlan ParseShardPlan(std::string_view text, int num_tables, int num_gpus);

// The plan in ParseShardPlan's syntax (they round-trip).
std::string FormatShardPlan(const ShardPlan& plan);

// The plan as a table for people: one line per table (kind, GPUs, rows,
// resident MiB, lookups per batch), then one per GPU (MiB and % of its
// budget, lookup work and its share), then the imbalance (the busiest GPU
// against the mean) of bytes and of lookup work.
std::string DescribeShardPlan(const ShardPlan& plan, const std::vector<ShardingTable>& tables,
                              const std::vector<double>& gpu_budget_bytes);

}  // namespace ember::train
