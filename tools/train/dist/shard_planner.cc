#include "tools/train/dist/shard_planner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include <fmt/format.h>

#include "engine/error.h"

namespace ember::train {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

double Bytes(const ShardingTable& table) {
  return static_cast<double>(table.rows) * table.resident_bytes_per_row;
}
double Work(const ShardingTable& table) {
  return table.lookups_per_batch * static_cast<double>(table.dim);
}

void CheckInputs(const std::vector<ShardingTable>& tables, const ShardPlannerOptions& options) {
  if (options.gpu_budget_bytes.empty()) throw InvalidArgument("[PlanShards] no GPU to plan for");
  for (size_t g = 0; g < options.gpu_budget_bytes.size(); ++g) {
    const double budget = options.gpu_budget_bytes[g];
    if (!(budget > 0) || !std::isfinite(budget)) {
      throw InvalidArgument(fmt::format("[PlanShards] GPU {} has a budget of {} bytes", g, budget));
    }
  }
  for (size_t t = 0; t < tables.size(); ++t) {
    const ShardingTable& table = tables[t];
    if (table.rows < 1 || table.dim < 1 || !(table.resident_bytes_per_row >= 0) ||
        !(table.lookups_per_batch >= 0)) {
      throw InvalidArgument(fmt::format(
          "[PlanShards] table {}: {} rows, dim {}, {} bytes a row, {} lookups a batch", t,
          table.rows, table.dim, table.resident_bytes_per_row, table.lookups_per_batch));
    }
  }
}

// The greedy placement, with the loads so far.
class Placer {
 public:
  Placer(const std::vector<ShardingTable>& tables, const ShardPlannerOptions& options)
      : budgets_(options.gpu_budget_bytes), loads_(budgets_.size()) {
    for (const ShardingTable& table : tables) {
      total_bytes_ += Bytes(table), total_work_ += Work(table);
    }
  }

  [[nodiscard]] int gpus() const { return static_cast<int>(budgets_.size()); }

  // A table's larger share of all bytes and of all work.
  [[nodiscard]] double Share(const ShardingTable& table) const {
    return std::max(Normalized(Bytes(table), total_bytes_), Normalized(Work(table), total_work_));
  }

  void Add(const TableShard& shard, const ShardingTable& table) {
    AddShardLoads(shard, table, loads_);
  }

  // The GPU with room for `table` where its larger normalized load ends
  // smallest (the lowest such GPU on ties); none when it fits nowhere.
  [[nodiscard]] std::optional<int> Best(const ShardingTable& table) const {
    std::optional<int> best;
    double best_load = std::numeric_limits<double>::infinity();
    for (int g = 0; g < gpus(); ++g) {
      const double bytes = loads_[g].resident_bytes + Bytes(table);
      if (bytes > budgets_[g]) continue;
      const double load = std::max(Normalized(bytes, total_bytes_),
                                   Normalized(loads_[g].lookup_work + Work(table), total_work_));
      if (load < best_load) best = g, best_load = load;
    }
    return best;
  }

  [[nodiscard]] double MostRoom() const {
    double room = 0;
    for (int g = 0; g < gpus(); ++g) room = std::max(room, budgets_[g] - loads_[g].resident_bytes);
    return room;
  }

 private:
  static double Normalized(double value, double total) { return total > 0 ? value / total : 0; }

  std::vector<double> budgets_;
  std::vector<GpuLoad> loads_;
  double total_bytes_ = 0;
  double total_work_ = 0;
};

bool SplitRowWise(const ShardingTable& table, const Placer& placer, ShardingPolicy policy) {
  if (policy != ShardingPolicy::kAuto) return policy == ShardingPolicy::kRowWise;
  return placer.gpus() > 1 && placer.Share(table) > 1.0 / placer.gpus();
}

}  // namespace

ShardingPolicy ParseShardingPolicy(std::string_view name) {
  if (name == "auto") return ShardingPolicy::kAuto;
  if (name == "table") return ShardingPolicy::kTableWise;
  if (name == "row") return ShardingPolicy::kRowWise;
  throw InvalidArgument(
      fmt::format("[ParseShardingPolicy] unknown sharding '{}': auto, table or row", name));
}

ShardPlan PlanShards(const std::vector<ShardingTable>& tables, const ShardPlannerOptions& options) {
  CheckInputs(tables, options);
  Placer placer(tables, options);
  ShardPlan plan{.num_gpus = placer.gpus(), .tables = std::vector<TableShard>(tables.size())};
  std::vector<size_t> table_wise;
  for (size_t t = 0; t < tables.size(); ++t) {
    if (SplitRowWise(tables[t], placer, options.policy)) {
      plan.tables[t] = {.kind = ShardKind::kRowWise};
      placer.Add(plan.tables[t], tables[t]);
    } else {
      table_wise.push_back(t);
    }
  }
  // Largest first, then by table: the same input gives the same plan.
  std::stable_sort(table_wise.begin(), table_wise.end(), [&](size_t a, size_t b) {
    return placer.Share(tables[a]) > placer.Share(tables[b]);
  });
  for (size_t t : table_wise) {
    if (const std::optional<int> gpu = placer.Best(tables[t])) {
      plan.tables[t] = {.kind = ShardKind::kTableWise, .gpu = *gpu};
      placer.Add(plan.tables[t], tables[t]);
    } else if (options.policy == ShardingPolicy::kAuto) {
      plan.tables[t] = {.kind = ShardKind::kRowWise};
      placer.Add(plan.tables[t], tables[t]);
    } else {
      throw InvalidArgument(fmt::format(
          "[PlanShards] table {} ({:.1f} MiB on its GPU) fits on no GPU table-wise: the most "
          "room left on one is {:.1f} MiB",
          t, Bytes(tables[t]) / kMiB, placer.MostRoom() / kMiB));
    }
  }
  try {
    CheckShardPlan(plan, tables, options.gpu_budget_bytes);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("[PlanShards] the tables fit in no plan: {}", e.what()));
  }
  return plan;
}

}  // namespace ember::train
