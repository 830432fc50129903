#pragma once

// Checkpoints of a DlrmModel: every weight (the tables' rows, the MLPs'
// parameters), every optimizer state, the step and the data position, and
// the rows the cache held, in one file per directory
// (<dir>/checkpoint.ember, checkpoint_file.h), replaced atomically.
//
// Sections a model writes (checkpoint_file.h has the byte format):
//   bottom.<l>.weight, bottom.<l>.bias, top.<l>.weight, top.<l>.bias
//     (f32) and, per parameter, .sum_sq (Adagrad) or .adam_m and .adam_v;
//   tables.weights (every row, table after table; the model's dtype),
//   tables.accumulator (row-wise Adagrad) or tables.adam_m, tables.adam_v;
//   cache.rows (i64: the rows the cache held, most recently used first).
//
// Thread safety: called from the thread that pushes the model's ops, with
// no batch in flight (the trainer drains its pipeline first).

#include <cstdint>
#include <string>

#include "tools/train/dlrm_model.h"

namespace ember::train {

inline constexpr char kCheckpointFileName[] = "checkpoint.ember";

// <dir>/checkpoint.ember.
[[nodiscard]] std::string CheckpointPath(const std::string& dir);

struct CheckpointPoint {
  int64_t step = 0;      // steps trained
  int64_t position = 0;  // the data position after them
};

// Flushes the cache (every cached row back home), waits for the model's
// tensors, and writes them with `point` to CheckpointPath(dir), atomically.
// Blocks until the file is durable. Throws what the waits rethrow (an op's
// error) and WriteCheckpointFile's Error; the previous checkpoint then
// stays.
void SaveCheckpoint(DlrmModel& model, const std::string& dir, const CheckpointPoint& point);

// Loads CheckpointPath(dir) into `model` and warms its cache with the rows
// the saved cache held (CachedTbe::Warm), and returns where it was taken.
// Throws InvalidArgument before changing anything for a missing or damaged
// file, or a checkpoint of another shape, naming every difference
// ("[LoadCheckpoint] DIR/checkpoint.ember holds another model: table 3
// rows: the checkpoint has 1000, this model 2000; ...").
CheckpointPoint LoadCheckpoint(DlrmModel& model, const std::string& dir);

}  // namespace ember::train
