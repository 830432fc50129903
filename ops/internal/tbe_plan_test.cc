// The host's plan for the TBE CUDA backward (tbe_plan.h): the register
// shape the widest table needs, float4 rows only when every dim and both
// pointers allow them, and chunks that cover the batch within the slot
// budget. Pure host code, so it runs everywhere.

#include "ops/internal/tbe_plan.h"

#include <cstdint>

#include <gtest/gtest.h>

namespace ember::ops::internal {
namespace {

TEST(TbePlanTest, RegisterShapeFitsTheWidestRow) {
  EXPECT_EQ(TbeBackwardVecs(1), 1);
  EXPECT_EQ(TbeBackwardVecs(128), 1);
  EXPECT_EQ(TbeBackwardVecs(129), 2);
  EXPECT_EQ(TbeBackwardVecs(256), 2);
  EXPECT_EQ(TbeBackwardVecs(257), 4);
  EXPECT_EQ(TbeBackwardVecs(512), 4);
  EXPECT_EQ(TbeBackwardVecs(513), 8);
  EXPECT_EQ(TbeBackwardVecs(kTbeBackwardCudaMaxDim), 8);
  EXPECT_EQ(TbeBackwardVecs(kTbeBackwardCudaMaxDim + 1), 0);
}

TEST(TbePlanTest, PlansForTheWidestTable) {
  // Tables of dims 4, 60, 128, 513 and 1024 share one TbeTables.
  const TbeTablesSummary mixed{.max_dim = 1024, .dims_multiple_of_4 = false};
  const TbeBackwardPlan plan = PlanTbeBackward(mixed, 4 + 60 + 128 + 513 + 1024, 1000, true);
  EXPECT_EQ(plan.vecs, 8);
  EXPECT_FALSE(plan.vector_rows);  // 60 and 4 would do, 513 does not
}

TEST(TbePlanTest, Float4RowsNeedEveryDimAndAlignment) {
  const TbeTablesSummary fours{.max_dim = 64, .dims_multiple_of_4 = true};
  EXPECT_TRUE(PlanTbeBackward(fours, 96, 100, /*aligned=*/true).vector_rows);
  EXPECT_FALSE(PlanTbeBackward(fours, 96, 100, /*aligned=*/false).vector_rows);
  const TbeTablesSummary odd{.max_dim = 64, .dims_multiple_of_4 = false};
  EXPECT_FALSE(PlanTbeBackward(odd, 95, 100, /*aligned=*/true).vector_rows);
}

// Every batch size: chunks of at least kTbeMinChunk (a multiple of 32 past
// it) cover the indices exactly, at most kTbeMaxChunks of them, and the
// slots of several chunks stay within the budget.
TEST(TbePlanTest, ChunksCoverTheBatchWithinTheBudget) {
  for (int64_t max_dim : {8, 128, 200, 1024}) {
    const TbeTablesSummary tables{.max_dim = max_dim, .dims_multiple_of_4 = true};
    for (int64_t total_dim : {max_dim, 3 * max_dim}) {
      for (int64_t n : {int64_t{1}, int64_t{63}, int64_t{64}, int64_t{65}, int64_t{10'000},
                        int64_t{1} << 20, int64_t{1} << 26, int64_t{2'147'483'647}}) {
        const TbeBackwardPlan plan = PlanTbeBackward(tables, total_dim, n, true);
        SCOPED_TRACE(testing::Message()
                     << "max_dim " << max_dim << ", total_dim " << total_dim << ", n " << n);
        EXPECT_GE(plan.chunk, kTbeMinChunk);
        EXPECT_EQ(plan.chunk % 32, 0);
        EXPECT_GE(plan.num_chunks * plan.chunk, n);
        EXPECT_LT((plan.num_chunks - 1) * plan.chunk, n);
        EXPECT_LE(plan.num_chunks, kTbeMaxChunks);
        EXPECT_EQ(plan.slot_floats, 2 * plan.num_chunks * 128 * plan.vecs);
        if (plan.num_chunks > 1) {
          EXPECT_LE(plan.slot_floats * 4, kTbeSlotBudget);
        }
      }
    }
  }
}

// The chunking of the device plan it replaces, kept so that results stay
// bit-identical: 64 occurrences a chunk while the slots fit, then
// n / 32768 rounded up to 32.
TEST(TbePlanTest, KeepsTheDevicePlansChunking) {
  const TbeTablesSummary tables{.max_dim = 128, .dims_multiple_of_4 = true};
  EXPECT_EQ(PlanTbeBackward(tables, 128, 100'000, true).chunk, 64);
  EXPECT_EQ(PlanTbeBackward(tables, 128, 100'000, true).num_chunks, 1563);
  EXPECT_EQ(PlanTbeBackward(tables, 128, 10'000'000, true).chunk, 320);
  // A budget sized by total_dim (384 columns) for rows of 300 (vecs 4).
  const TbeTablesSummary wide{.max_dim = 300, .dims_multiple_of_4 = true};
  EXPECT_EQ(PlanTbeBackward(wide, 300, 1000, true).chunk, 96);
}

}  // namespace
}  // namespace ember::ops::internal
