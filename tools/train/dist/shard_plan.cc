#include "tools/train/dist/shard_plan.h"

#include <algorithm>
#include <charconv>

#include <absl/strings/str_join.h>
#include <absl/strings/str_split.h>
#include <absl/strings/strip.h>
#include <fmt/format.h>

#include "engine/error.h"

namespace ember::train {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

void CheckSizes(const ShardPlan& plan, size_t num_tables, const char* where) {
  if (plan.num_gpus < 1) {
    throw InvalidArgument(
        fmt::format("[{}] a plan needs at least one GPU, not {}", where, plan.num_gpus));
  }
  if (plan.tables.size() != num_tables) {
    throw InvalidArgument(fmt::format("[{}] the plan places {} tables; the model has {}", where,
                                      plan.tables.size(), num_tables));
  }
}

std::string GpusOf(const TableShard& shard, int num_gpus) {
  if (shard.kind == ShardKind::kTableWise) return fmt::format("GPU {}", shard.gpu);
  return fmt::format("row-wise over {} GPUs", num_gpus);
}

// Parses a whole non-negative decimal; -1 when `text` is not one.
int64_t ParseCount(std::string_view text) {
  int64_t value = -1;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 0) return -1;
  return value;
}

TableShard ParseShard(std::string_view entry, std::string_view place, int num_gpus) {
  if (place == "row") return {.kind = ShardKind::kRowWise};
  const int64_t gpu = ParseCount(place);
  if (gpu < 0 || gpu >= num_gpus) {
    throw InvalidArgument(
        fmt::format("[ParseShardPlan] entry '{}': '{}' is neither a GPU in [0, {}) nor 'row'",
                    entry, place, num_gpus));
  }
  return {.kind = ShardKind::kTableWise, .gpu = static_cast<int>(gpu)};
}

}  // namespace

std::vector<int64_t> TableShard::RowsPerGpu(int64_t rows, int num_gpus) const {
  std::vector<int64_t> out(num_gpus, 0);
  if (kind == ShardKind::kTableWise) {
    out[gpu] = rows;
    return out;
  }
  // The first rows % G GPUs take one row more, so ranges differ by at most one.
  for (int g = 0; g < num_gpus; ++g) out[g] = rows / num_gpus + (g < rows % num_gpus ? 1 : 0);
  return out;
}

void AddShardLoads(const TableShard& shard, const ShardingTable& table,
                   std::vector<GpuLoad>& loads) {
  const int num_gpus = static_cast<int>(loads.size());
  const std::vector<int64_t> rows = shard.RowsPerGpu(table.rows, num_gpus);
  for (int g = 0; g < num_gpus; ++g) {
    const auto shard_rows = static_cast<double>(rows[g]);
    const double share = table.rows > 0 ? shard_rows / static_cast<double>(table.rows) : 0.0;
    loads[g].resident_bytes += shard_rows * table.resident_bytes_per_row;
    loads[g].lookup_work += share * table.lookups_per_batch * static_cast<double>(table.dim);
  }
}

std::vector<GpuLoad> GpuLoads(const ShardPlan& plan, const std::vector<ShardingTable>& tables) {
  CheckSizes(plan, tables.size(), "GpuLoads");
  std::vector<GpuLoad> loads(plan.num_gpus);
  for (size_t t = 0; t < tables.size(); ++t) AddShardLoads(plan.tables[t], tables[t], loads);
  return loads;
}

void CheckShardPlan(const ShardPlan& plan, const std::vector<ShardingTable>& tables,
                    const std::vector<double>& gpu_budget_bytes) {
  CheckSizes(plan, tables.size(), "CheckShardPlan");
  if (gpu_budget_bytes.size() != static_cast<size_t>(plan.num_gpus)) {
    throw InvalidArgument(fmt::format("[CheckShardPlan] {} GPU budgets for a plan over {} GPUs",
                                      gpu_budget_bytes.size(), plan.num_gpus));
  }
  for (size_t t = 0; t < plan.tables.size(); ++t) {
    const TableShard& shard = plan.tables[t];
    if (shard.kind == ShardKind::kTableWise && (shard.gpu < 0 || shard.gpu >= plan.num_gpus)) {
      throw InvalidArgument(
          fmt::format("[CheckShardPlan] table {} is placed on GPU {}, not in [0, {})", t, shard.gpu,
                      plan.num_gpus));
    }
  }
  const std::vector<GpuLoad> loads = GpuLoads(plan, tables);
  for (int g = 0; g < plan.num_gpus; ++g) {
    if (loads[g].resident_bytes <= gpu_budget_bytes[g]) continue;
    std::vector<std::string> on_gpu;
    for (size_t t = 0; t < plan.tables.size(); ++t) {
      const TableShard& shard = plan.tables[t];
      if (shard.kind == ShardKind::kRowWise || shard.gpu == g) on_gpu.push_back(std::to_string(t));
    }
    throw InvalidArgument(fmt::format(
        "[CheckShardPlan] GPU {} would hold {:.1f} MiB of tables {} but its budget is {:.1f} MiB",
        g, loads[g].resident_bytes / kMiB, absl::StrJoin(on_gpu, ","), gpu_budget_bytes[g] / kMiB));
  }
}

ShardPlan ParseShardPlan(std::string_view text, int num_tables, int num_gpus) {
  if (num_gpus < 1) {
    throw InvalidArgument(
        fmt::format("[ParseShardPlan] {} GPUs: at least one is needed", num_gpus));
  }
  ShardPlan plan{.num_gpus = num_gpus, .tables = std::vector<TableShard>(num_tables)};
  std::vector<bool> seen(num_tables, false);
  // This Abseil's string_view is not std's: split and strip in its own.
  const absl::string_view all(text.data(), text.size());
  for (absl::string_view piece : absl::StrSplit(all, ',', absl::SkipWhitespace())) {
    piece = absl::StripAsciiWhitespace(piece);
    const std::string_view entry(piece.data(), piece.size());
    const size_t colon = entry.find(':');
    const int64_t t = colon == std::string_view::npos ? -1 : ParseCount(entry.substr(0, colon));
    if (t < 0 || t >= num_tables) {
      throw InvalidArgument(
          fmt::format("[ParseShardPlan] entry '{}': expected 'table:gpu' or 'table:row' with a "
                      "table in [0, {})",
                      entry, num_tables));
    }
    if (seen[t]) {
      throw InvalidArgument(
          fmt::format("[ParseShardPlan] entry '{}': table {} is placed twice", entry, t));
    }
    seen[t] = true;
    plan.tables[t] = ParseShard(entry, entry.substr(colon + 1), num_gpus);
  }
  const auto missing = std::find(seen.begin(), seen.end(), false);
  if (missing != seen.end()) {
    throw InvalidArgument(
        fmt::format("[ParseShardPlan] table {} is not placed (every table of "
                    "the {} needs an entry)",
                    missing - seen.begin(), num_tables));
  }
  return plan;
}

std::string FormatShardPlan(const ShardPlan& plan) {
  std::vector<std::string> entries;
  for (size_t t = 0; t < plan.tables.size(); ++t) {
    const TableShard& shard = plan.tables[t];
    entries.push_back(shard.kind == ShardKind::kRowWise ? fmt::format("{}:row", t)
                                                        : fmt::format("{}:{}", t, shard.gpu));
  }
  return absl::StrJoin(entries, ",");
}

std::string DescribeShardPlan(const ShardPlan& plan, const std::vector<ShardingTable>& tables,
                              const std::vector<double>& gpu_budget_bytes) {
  const std::vector<GpuLoad> loads = GpuLoads(plan, tables);
  std::string out = fmt::format("{:>5}  {:<24} {:>12} {:>12} {:>14}\n", "table", "placement",
                                "rows", "MiB on GPUs", "lookups/batch");
  for (size_t t = 0; t < tables.size(); ++t) {
    const ShardingTable& table = tables[t];
    out += fmt::format("{:>5}  {:<24} {:>12} {:>12.1f} {:>14.0f}\n", t,
                       GpusOf(plan.tables[t], plan.num_gpus), table.rows,
                       static_cast<double>(table.rows) * table.resident_bytes_per_row / kMiB,
                       table.lookups_per_batch);
  }
  double total_bytes = 0;
  double total_work = 0;
  double max_bytes = 0;
  double max_work = 0;
  for (const GpuLoad& load : loads) {
    total_bytes += load.resident_bytes, total_work += load.lookup_work;
    max_bytes = std::max(max_bytes, load.resident_bytes);
    max_work = std::max(max_work, load.lookup_work);
  }
  out += fmt::format("{:>5}  {:>12} {:>10} {:>16} {:>8}\n", "GPU", "MiB", "of budget",
                     "lookups x dim", "share");
  for (int g = 0; g < plan.num_gpus; ++g) {
    const double budget = g < static_cast<int>(gpu_budget_bytes.size()) ? gpu_budget_bytes[g] : 0;
    out += fmt::format(
        "{:>5}  {:>12.1f} {:>9.1f}% {:>16.0f} {:>7.1f}%\n", g, loads[g].resident_bytes / kMiB,
        budget > 0 ? 100 * loads[g].resident_bytes / budget : 0.0, loads[g].lookup_work,
        total_work > 0 ? 100 * loads[g].lookup_work / total_work : 0.0);
  }
  const double gpus = plan.num_gpus;
  out += fmt::format("imbalance (busiest GPU / mean): bytes {:.2f}x, lookup work {:.2f}x\n",
                     total_bytes > 0 ? max_bytes * gpus / total_bytes : 1.0,
                     total_work > 0 ? max_work * gpus / total_work : 1.0);
  out += fmt::format("plan: {}\n", FormatShardPlan(plan));
  return out;
}

}  // namespace ember::train
