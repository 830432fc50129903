// PlanShards (tools/train/dist/shard_planner.h): balance by bytes and by
// lookups, row-wise splits of dominant or oversized tables, the policies,
// and errors for what fits nowhere; on random tables, every plan fits and
// no GPU carries more than 3/G of either load.

#include "tools/train/dist/shard_planner.h"

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/error.h"
#include "tests/train/dist/dist_test_util.h"

namespace ember::train {
namespace {

using testing::ErrorOf;
using ::testing::HasSubstr;

constexpr double kMiB = 1024.0 * 1024.0;

ShardingTable Table(int64_t rows, double lookups, int64_t dim = 16) {
  return {.rows = rows, .dim = dim, .resident_bytes_per_row = 64.0, .lookups_per_batch = lookups};
}

TEST(ShardPlannerTest, OneGpuTakesEveryTableWhole) {
  const ShardPlan plan = PlanShards({Table(100, 1), Table(1000, 50)}, {.gpu_budget_bytes = {kMiB}});
  EXPECT_EQ(FormatShardPlan(plan), "0:0,1:0");
}

TEST(ShardPlannerTest, EqualTablesSpreadEvenly) {
  const std::vector<ShardingTable> tables(8, Table(1000, 10));
  const ShardPlan plan = PlanShards(tables, {.gpu_budget_bytes = {kMiB, kMiB, kMiB, kMiB}});
  for (const GpuLoad& load : GpuLoads(plan, tables)) {
    EXPECT_DOUBLE_EQ(load.resident_bytes, 2 * 1000 * 64.0);
  }
}

TEST(ShardPlannerTest, HotSmallTablesGoToDifferentGpus) {
  // Equal bytes; two tables take nearly all the lookups. Balancing bytes
  // alone could pair the hot two; the work must split.
  const std::vector<ShardingTable> tables = {Table(1000, 1), Table(1000, 500), Table(1000, 1),
                                             Table(1000, 500)};
  const ShardPlan plan = PlanShards(tables, {.gpu_budget_bytes = {kMiB, kMiB}});
  EXPECT_NE(plan.tables[1].gpu, plan.tables[3].gpu);
  const std::vector<GpuLoad> loads = GpuLoads(plan, tables);
  EXPECT_DOUBLE_EQ(loads[0].lookup_work, loads[1].lookup_work);
  EXPECT_DOUBLE_EQ(loads[0].resident_bytes, loads[1].resident_bytes);
}

TEST(ShardPlannerTest, ADominantTableIsSplitRowWise) {
  // Table 0 holds most bytes: alone on a GPU it would leave the others idle.
  const ShardPlan plan = PlanShards({Table(100000, 10), Table(1000, 10), Table(1000, 10)},
                                    {.gpu_budget_bytes = {64 * kMiB, 64 * kMiB}});
  EXPECT_EQ(plan.tables[0].kind, ShardKind::kRowWise);
  EXPECT_NE(plan.tables[1].gpu, plan.tables[2].gpu);
}

TEST(ShardPlannerTest, ATableThatFitsNoGpuWholeIsSplitUnderAutoAndRefusedUnderTable) {
  // Each table is a third of the bytes (under a GPU's fair share), but
  // after two of them neither GPU has room for the third whole.
  const std::vector<ShardingTable> tables(3, Table(9830, 10));
  const ShardPlannerOptions one_mib = {.gpu_budget_bytes = {kMiB, kMiB}};
  EXPECT_EQ(FormatShardPlan(PlanShards(tables, one_mib)), "0:0,1:1,2:row");
  ShardPlannerOptions table_wise = one_mib;
  table_wise.policy = ShardingPolicy::kTableWise;
  EXPECT_THAT(ErrorOf([&] { PlanShards(tables, table_wise); }),
              HasSubstr("table 2 (0.6 MiB on its GPU) fits on no GPU table-wise: the most room "
                        "left on one is 0.4 MiB"));
}

TEST(ShardPlannerTest, RowPolicySplitsEveryTable) {
  const ShardPlan plan =
      PlanShards({Table(10, 1), Table(20, 1)},
                 {.gpu_budget_bytes = {kMiB, kMiB, kMiB}, .policy = ShardingPolicy::kRowWise});
  EXPECT_EQ(FormatShardPlan(plan), "0:row,1:row");
}

TEST(ShardPlannerTest, WhatFitsNowhereIsAnError) {
  EXPECT_THAT(ErrorOf([] {
                PlanShards({Table(100000, 1)}, {.gpu_budget_bytes = {kMiB, kMiB}});
              }),
              HasSubstr("[PlanShards] the tables fit in no plan: [CheckShardPlan] GPU 0 would "
                        "hold 3.1 MiB of tables 0 but its budget is 1.0 MiB"));
  EXPECT_THAT(ErrorOf([] { PlanShards({Table(1, 1)}, {}); }), HasSubstr("no GPU to plan for"));
  EXPECT_THAT(ErrorOf([] { PlanShards({Table(1, 1)}, {.gpu_budget_bytes = {0}}); }),
              HasSubstr("GPU 0 has a budget of 0 bytes"));
  EXPECT_THAT(ErrorOf([] { PlanShards({Table(0, 1)}, {.gpu_budget_bytes = {kMiB}}); }),
              HasSubstr("table 0: 0 rows"));
  EXPECT_THAT(ErrorOf([] { ParseShardingPolicy("columns"); }),
              HasSubstr("unknown sharding 'columns': auto, table or row"));
}

// With room to spare, every GPU's larger normalized load is at most 3/G:
// before a table-wise placement some GPU has at most 2/G (the G loads sum
// to at most 2), and under kAuto a table-wise table adds at most 1/G.
TEST(ShardPlannerTest, RandomTablesFitAndStayWithinTheBound) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const int gpus = 1 + static_cast<int>(rng() % 8);
    const int num_tables = 1 + static_cast<int>(rng() % 40);
    std::vector<ShardingTable> tables;
    double bytes = 0, work = 0;
    for (int t = 0; t < num_tables; ++t) {
      ShardingTable table = Table(1 + static_cast<int64_t>(rng() % 100000),
                                  static_cast<double>(rng() % 5000), 4 << (rng() % 5));
      bytes += static_cast<double>(table.rows) * table.resident_bytes_per_row;
      work += table.lookups_per_batch * static_cast<double>(table.dim);
      tables.push_back(table);
    }
    const ShardPlan plan =
        PlanShards(tables, {.gpu_budget_bytes = std::vector<double>(gpus, bytes)});
    ASSERT_EQ(plan.tables.size(), tables.size());
    EXPECT_EQ(
        FormatShardPlan(PlanShards(tables, {.gpu_budget_bytes = std::vector<double>(gpus, bytes)})),
        FormatShardPlan(plan))
        << "not deterministic";
    for (const GpuLoad& load : GpuLoads(plan, tables)) {
      EXPECT_LE(load.resident_bytes / bytes, 3.0 / gpus + 1e-9) << "trial " << trial;
      if (work > 0) {
        EXPECT_LE(load.lookup_work / work, 3.0 / gpus + 1e-9) << "trial " << trial;
      }
    }
  }
}

}  // namespace
}  // namespace ember::train
