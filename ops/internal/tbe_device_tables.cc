// TbeDeviceTables' host half: the packing and the summary, made once per
// TbeTables (the device copies are in tbe_device_tables_cuda.cc).

#include "ops/internal/tbe_device_tables.h"

#include <algorithm>

#include "ops/embedding_bag.h"

namespace ember::ops::internal {

TbeDeviceTables::TbeDeviceTables(const TbeTables& tables) : num_tables_(tables.num_tables()) {
  const int t_count = num_tables_;
  values_.reserve(5 * static_cast<std::size_t>(t_count) + 3);
  for (int t = 0; t < t_count; ++t) values_.push_back(tables.rows(t));
  for (int t = 0; t < t_count; ++t) values_.push_back(tables.dim(t));
  for (int t = 0; t <= t_count; ++t) {
    values_.push_back(t < t_count ? tables.row_offset(t) : tables.total_rows());
  }
  for (int t = 0; t <= t_count; ++t) {
    values_.push_back(t < t_count ? tables.weight_offset(t) : tables.total_elements());
  }
  for (int t = 0; t <= t_count; ++t) {
    values_.push_back(t < t_count ? tables.output_offset(t) : tables.total_dim());
  }
  for (int t = 0; t < t_count; ++t) {
    summary_.max_dim = std::max(summary_.max_dim, tables.dim(t));
    summary_.dims_multiple_of_4 = summary_.dims_multiple_of_4 && tables.dim(t) % 4 == 0;
  }
}

void TbeDeviceTables::PointInto(const int64_t* base, TbeArgs& args) const {
  const int64_t t_count = num_tables_;
  args.rows = base;
  args.dims = base + t_count;
  args.row_offsets = base + 2 * t_count;
  args.weight_offsets = base + 3 * t_count + 1;
  args.output_offsets = base + 4 * t_count + 2;
}

}  // namespace ember::ops::internal
