// ShardPlan (tools/train/dist/shard_plan.h): row ranges, loads, the checks
// against the GPUs' budgets, the user's syntax and its errors.

#include "tools/train/dist/shard_plan.h"

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

TEST(ShardPlanTest, RowWiseRangesDifferByAtMostOneRow) {
  const TableShard row{.kind = ShardKind::kRowWise};
  EXPECT_EQ(row.RowsPerGpu(7, 3), (std::vector<int64_t>{3, 2, 2}));
  EXPECT_EQ(row.RowsPerGpu(2, 4), (std::vector<int64_t>{1, 1, 0, 0}));
  EXPECT_EQ(row.RowsPerGpu(8, 1), (std::vector<int64_t>{8}));
  const TableShard table{.kind = ShardKind::kTableWise, .gpu = 2};
  EXPECT_EQ(table.RowsPerGpu(7, 3), (std::vector<int64_t>{0, 0, 7}));
}

TEST(ShardPlanTest, LoadsAddEachShardsBytesAndWork) {
  const std::vector<ShardingTable> tables = {
      {.rows = 100, .dim = 4, .resident_bytes_per_row = 16, .lookups_per_batch = 10},
      {.rows = 10, .dim = 8, .resident_bytes_per_row = 32, .lookups_per_batch = 30},
  };
  const ShardPlan plan{.num_gpus = 2, .tables = {{.kind = ShardKind::kRowWise}, {.gpu = 1}}};
  const std::vector<GpuLoad> loads = GpuLoads(plan, tables);
  ASSERT_EQ(loads.size(), 2u);
  EXPECT_DOUBLE_EQ(loads[0].resident_bytes, 50 * 16);
  EXPECT_DOUBLE_EQ(loads[0].lookup_work, 5 * 4);
  EXPECT_DOUBLE_EQ(loads[1].resident_bytes, 50 * 16 + 10 * 32);
  EXPECT_DOUBLE_EQ(loads[1].lookup_work, 5 * 4 + 30 * 8);
}

TEST(ShardPlanTest, CheckNamesTheGpuThatOverflowsAndItsTables) {
  const std::vector<ShardingTable> tables(
      3, {.rows = 1024, .dim = 16, .resident_bytes_per_row = 1024, .lookups_per_batch = 1});
  const ShardPlan plan = ParseShardPlan("0:0,1:1,2:1", 3, 2);
  EXPECT_NO_THROW(CheckShardPlan(plan, tables, {1 * kMiB, 2 * kMiB}));
  EXPECT_EQ(ErrorOf([&] {
              CheckShardPlan(plan, tables, {2 * kMiB, 1.5 * kMiB});
            }),
            "[CheckShardPlan] GPU 1 would hold 2.0 MiB of tables 1,2 but its budget is 1.5 MiB");
  EXPECT_THAT(ErrorOf([&] { CheckShardPlan(plan, tables, {2 * kMiB}); }),
              HasSubstr("1 GPU budgets for a plan over 2 GPUs"));
  EXPECT_THAT(ErrorOf([&] {
                CheckShardPlan(plan, {tables[0]}, {2 * kMiB, 2 * kMiB});
              }),
              HasSubstr("the plan places 3 tables; the model has 1"));
  ShardPlan off = plan;
  off.tables[2].gpu = 5;
  EXPECT_THAT(ErrorOf([&] {
                CheckShardPlan(off, tables, {2 * kMiB, 2 * kMiB});
              }),
              HasSubstr("table 2 is placed on GPU 5, not in [0, 2)"));
}

TEST(ShardPlanTest, ParsesAndFormatsTheUsersSyntax) {
  const ShardPlan plan = ParseShardPlan(" 2:row, 0:1 ,1:0", 3, 2);
  ASSERT_EQ(plan.tables.size(), 3u);
  EXPECT_EQ(plan.tables[0].kind, ShardKind::kTableWise);
  EXPECT_EQ(plan.tables[0].gpu, 1);
  EXPECT_EQ(plan.tables[1].gpu, 0);
  EXPECT_EQ(plan.tables[2].kind, ShardKind::kRowWise);
  EXPECT_EQ(FormatShardPlan(plan), "0:1,1:0,2:row");
  EXPECT_EQ(FormatShardPlan(ParseShardPlan(FormatShardPlan(plan), 3, 2)), "0:1,1:0,2:row");
}

TEST(ShardPlanTest, ABadPlanNamesItsEntry) {
  EXPECT_THAT(ErrorOf([] { ParseShardPlan("0:0,0:1", 2, 2); }),
              HasSubstr("entry '0:1': table 0 is placed twice"));
  EXPECT_THAT(ErrorOf([] { ParseShardPlan("0:0", 2, 2); }), HasSubstr("table 1 is not placed"));
  EXPECT_THAT(ErrorOf([] { ParseShardPlan("0:2,1:0", 2, 2); }),
              HasSubstr("entry '0:2': '2' is neither a GPU in [0, 2) nor 'row'"));
  EXPECT_THAT(ErrorOf([] { ParseShardPlan("0:rows,1:0", 2, 2); }), HasSubstr("'rows' is neither"));
  EXPECT_THAT(ErrorOf([] { ParseShardPlan("0:0,1", 2, 2); }),
              HasSubstr("entry '1': expected 'table:gpu' or 'table:row'"));
  EXPECT_THAT(ErrorOf([] { ParseShardPlan("0:0,7:1", 2, 2); }), HasSubstr("entry '7:1': expected"));
  EXPECT_THAT(ErrorOf([] { ParseShardPlan("0:0,-1:1", 2, 2); }), HasSubstr("entry '-1:1'"));
  EXPECT_THAT(ErrorOf([] { ParseShardPlan("0:0", 1, 0); }), HasSubstr("at least one is needed"));
}

TEST(ShardPlanTest, DescribeShowsTablesGpusAndImbalance) {
  const std::vector<ShardingTable> tables(
      2, {.rows = 1024, .dim = 8, .resident_bytes_per_row = 1024, .lookups_per_batch = 100});
  const std::string text =
      DescribeShardPlan(ParseShardPlan("0:0,1:row", 2, 2), tables, {4 * kMiB, 4 * kMiB});
  EXPECT_THAT(text, HasSubstr("GPU 0"));
  EXPECT_THAT(text, HasSubstr("row-wise over 2 GPUs"));
  EXPECT_THAT(text, HasSubstr("imbalance (busiest GPU / mean): bytes 1.50x, lookup work 1.50x"));
  EXPECT_THAT(text, HasSubstr("plan: 0:0,1:row"));
}

}  // namespace
}  // namespace ember::train
