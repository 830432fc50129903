// TbeDeviceTables' host half (tbe_device_tables.h): the arrays packed once
// per TbeTables in the order TbeArgs reads them, the summary the host plans
// with, and one of them shared by a TbeTables and its copies (so that they
// share the GPU copies too). The GPU copies are tested through the ops
// (tests/ops/embedding_bag_validation_cuda_test.cc).

#include "ops/internal/tbe_device_tables.h"

#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "ops/embedding_bag.h"

namespace ember::ops::internal {
namespace {

TEST(TbeDeviceTablesTest, PacksTheArraysAsTbeArgsReadsThem) {
  const TbeTables tables({10, 3, 7}, {4, 130, 1});
  const TbeDeviceTables& packed = *TbeTablesAccess::DeviceTables(tables);
  EXPECT_EQ(packed.host_values(), (std::vector<int64_t>{10, 3, 7,           // rows
                                                        4, 130, 1,          // dims
                                                        0, 10, 13, 20,      // row offsets
                                                        0, 40, 430, 437,    // weight offsets
                                                        0, 4, 134, 135}));  // output offsets
  TbeArgs args;
  packed.PointAtHost(args);
  for (int t = 0; t < 3; ++t) {
    EXPECT_EQ(args.rows[t], tables.rows(t));
    EXPECT_EQ(args.dims[t], tables.dim(t));
    EXPECT_EQ(args.row_offsets[t], tables.row_offset(t));
    EXPECT_EQ(args.weight_offsets[t], tables.weight_offset(t));
    EXPECT_EQ(args.output_offsets[t], tables.output_offset(t));
  }
  EXPECT_EQ(args.row_offsets[3], tables.total_rows());
  EXPECT_EQ(args.weight_offsets[3], tables.total_elements());
  EXPECT_EQ(args.output_offsets[3], tables.total_dim());
}

TEST(TbeDeviceTablesTest, SummarizesWhatThePlanNeeds) {
  const TbeTables odd({10, 3, 7}, {4, 130, 1});
  EXPECT_EQ(TbeTablesAccess::DeviceTables(odd)->summary().max_dim, 130);
  EXPECT_FALSE(TbeTablesAccess::DeviceTables(odd)->summary().dims_multiple_of_4);
  const TbeTables fours({5, 5}, {1024, 8});
  EXPECT_EQ(TbeTablesAccess::DeviceTables(fours)->summary().max_dim, 1024);
  EXPECT_TRUE(TbeTablesAccess::DeviceTables(fours)->summary().dims_multiple_of_4);
}

TEST(TbeDeviceTablesTest, CopiesShareOneAndEqualTablesDoNot) {
  const TbeTables tables({10, 3}, {4, 8});
  const TbeTables copy = tables;  // NOLINT(performance-unnecessary-copy-initialization)
  const TbeTables other({10, 3}, {4, 8});
  EXPECT_EQ(TbeTablesAccess::DeviceTables(copy), TbeTablesAccess::DeviceTables(tables));
  EXPECT_NE(TbeTablesAccess::DeviceTables(other), TbeTablesAccess::DeviceTables(tables));
}

}  // namespace
}  // namespace ember::ops::internal
