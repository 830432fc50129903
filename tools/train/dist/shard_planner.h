#pragma once

// PlanShards: a shard plan (shard_plan.h) for G GPUs from the tables'
// sizes, dims and expected lookups and each GPU's memory budget, balanced
// by resident bytes and by lookup work at once (TorchRec's planner ranks
// placements by estimated cost the same way; this one is greedy):
//  - a table that alone is more than a GPU's fair share of either (over
//    1/G of all bytes or of all lookup work), or that fits on no GPU, is
//    split row-wise over every GPU;
//  - the others go table-wise, largest first, each on the GPU where the
//    larger of its two normalized loads (bytes / all bytes, work / all
//    work) ends smallest among those with room for it.
// Why both measures: bytes decide whether a plan fits, lookups decide the
// step time of the busiest GPU; a plan balanced by bytes alone can put the
// hottest small tables on one GPU.
//
// Thread safety: a pure function.

#include <string_view>
#include <vector>

#include "tools/train/dist/shard_plan.h"

namespace ember::train {

enum class ShardingPolicy {
  kAuto,       // as above
  kTableWise,  // every table on one GPU (fails when a table fits on none)
  kRowWise,    // every table over every GPU
};

// "auto", "table" or "row"; throws InvalidArgument listing them.
ShardingPolicy ParseShardingPolicy(std::string_view name);

struct ShardPlannerOptions {
  std::vector<double> gpu_budget_bytes;  // one per GPU: G = its size
  ShardingPolicy policy = ShardingPolicy::kAuto;
};

// Throws InvalidArgument "[PlanShards] ..." when no GPU is given, a budget
// or a table is not positive, or the tables fit in no plan of the policy
// (naming the table that does not fit, its bytes and the room left).
ShardPlan PlanShards(const std::vector<ShardingTable>& tables, const ShardPlannerOptions& options);

}  // namespace ember::train
