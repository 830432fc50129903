#pragma once

// ReadModelState: every value a trained DlrmModel holds, copied to the
// host by section name: each dense parameter and optimizer state
// (DlrmModel::ForEachDenseState's names), "tables.weights" (every row,
// flushed home from the cache first) and the tables' optimizer state
// (ForEachTableState's names). What two runs are compared by, bit for bit
// (the schedules' tests, ember-train --ranks with --check_unsharded).
// Waits for the model's pending ops.
//
// Thread safety: the model's training thread, between steps.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tools/train/dlrm_model.h"

namespace ember::train {

using ModelState = std::map<std::string, std::vector<float>>;

ModelState ReadModelState(DlrmModel& model);

// How two states differ, section by section (the same names, sizes and
// bits: identical).
struct StateDifference {
  int64_t sections = 0;                // compared (in both)
  int64_t values = 0;                  // compared
  int64_t values_differ = 0;           // not bit for bit equal
  double largest = 0;                  // the largest absolute difference
  std::string largest_in;              // its section
  std::vector<std::string> unmatched;  // sections in one state only, or of two sizes

  [[nodiscard]] bool identical() const { return values_differ == 0 && unmatched.empty(); }
  // One line: "identical: 14 sections, 5,000 values bit for bit", or what differs.
  [[nodiscard]] std::string Describe() const;
};

StateDifference CompareStates(const ModelState& a, const ModelState& b);

// The tensor's values as floats on the host (f32 tensors; a device tensor
// is copied). Waits for its pending writes.
std::vector<float> ReadFloats(const storage::Tensor& tensor);

}  // namespace ember::train
