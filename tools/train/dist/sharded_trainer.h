#pragma once

// TrainSharded: sharded training of the DLRM-style model over G ranks in
// this process, a thread and an engine per rank, the ranks meeting in an
// in-process communicator: the multi-GPU code path (ShardedDlrm and its
// schedules) on the CPU, which `ember-train --ranks` runs. Every rank reads
// the same data (a source of its own from `data`) and trains on its slice
// of each global batch (SliceBatch); a batch that does not split evenly
// over the ranks is an error, not dropped.
//
// ReadShardedState gathers what the ranks hold into ReadModelState's
// sections (model_state.h), so that a run can be compared with one
// process's: the dense state from rank 0 (after checking that every rank
// holds the same bits), each table's rows and optimizer state from their
// owners, at their place in the unsharded tables.
//
// Errors: InvalidArgument for options that do not fit (a plan for other
// tables, a model the sharded TBE cannot hold); a rank's error stops every
// rank (the communicator's group breaks) and is rethrown, the lowest
// failing rank's first.
//
// Thread safety: one call at a time per group of ranks; `on_step` is called
// from rank 0's thread.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "cache/cache_options.h"
#include "engine/engine_options.h"
#include "tools/train/data/batch_source.h"
#include "tools/train/dist/shard_plan.h"
#include "tools/train/dist/sharded_schedule.h"
#include "tools/train/model_config.h"
#include "tools/train/model_state.h"

namespace ember::train {

struct ShardedTrainOptions {
  ModelConfig model;
  ShardPlan plan;  // its num_gpus is the number of ranks
  ShardedSchedule schedule = ShardedSchedule::kSparseDist;
  int64_t steps = 0;                         // 0: until the data ends
  std::optional<cache::CacheOptions> cache;  // an embedding cache on each rank
  engine::EngineOptions engine;              // each rank's engine
};

struct ShardedTrainResult {
  std::vector<float> losses;  // per step: the global batch's mean loss
  int64_t examples = 0;
  double seconds = 0;  // from the first step's push to the last step's end
  ModelState state;    // ReadShardedState's
};

ShardedTrainResult TrainSharded(const ShardedTrainOptions& options,
                                const std::function<std::unique_ptr<BatchSource>()>& data,
                                const std::function<void(int64_t step, float loss)>& on_step = {});

}  // namespace ember::train
