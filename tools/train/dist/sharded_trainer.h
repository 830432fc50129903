#pragma once

// TrainSharded: sharded training of the DLRM-style model over G ranks in
// this process, a thread and an engine per rank (ShardedDlrm and its
// schedules), which `ember-train --ranks` runs. On GPUs rank r trains on
// GPU r and the ranks meet in NCCL (one process drives every GPU of its
// host); on the CPU they meet in an in-process communicator: the same code
// path without a GPU. Every rank reads the same data (a source of its own
// from `data`) and trains on its slice of each global batch (SliceBatch);
// a batch that does not split evenly over the ranks is an error, not
// dropped.
//
// The result's state gathers what the ranks hold into ReadModelState's
// sections (model_state.h), so that a run can be compared with one
// process's: the dense state from the first rank (after checking that
// every rank holds the same bits), each table's rows and optimizer state
// from their owners, at their place in the unsharded tables.
//
// Errors: InvalidArgument for options that do not fit (a plan for other
// tables, a model the sharded TBE cannot hold, more GPUs than there are),
// Unavailable without NCCL, and for several GPU ranks in a process whose
// kernels load lazily (kernel_loading.h: such a run can hang); a rank's error stops every rank (the
// communicator's group breaks: at once on the CPU, at the peers' next
// collective's timeout over NCCL) and is rethrown, the lowest failing
// rank's first.
//
// Thread safety: one call at a time per group of ranks; `on_step` is called
// from the thread of this process's first rank; the data factories on the
// calling thread.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "cache/cache_options.h"
#include "cache/cache_stats.h"
#include "engine/engine_options.h"
#include "tools/train/data/batch_source.h"
#include "tools/train/dist/communicator.h"
#include "tools/train/dist/in_process_communicator.h"
#include "tools/train/dist/nccl_communicator.h"
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
  // Rank r on GPU r with NCCL (nccl.record_timings: the result's timings);
  // else the CPU. On GPUs each rank's engine gets one more GPU worker than
  // `engine` asks (a collective holds the worker that runs it until NCCL
  // has finished, and the compute keeps the others) and at least two CPU
  // workers (the input's packing and unpacking, CPU ops, overlap).
  bool gpus = false;
  NcclCommunicatorOptions nccl;
  // The ranks this process runs: `local_ranks` of them from `first_rank`
  // (0 and 0: every rank of the plan). On GPUs, rank first_rank + l runs
  // on this process's GPU l. A multi-host run gives each host's process
  // its part and the group's `nccl_id` (rendezvous.h); CPU ranks split
  // over several calls of one process share `cpu_group` (tests).
  int first_rank = 0;
  int local_ranks = 0;
  std::optional<NcclUniqueId> nccl_id;
  InProcessCommunicatorGroup* cpu_group = nullptr;
  // Called on each rank's thread with its communicator after its run (the
  // run's ops all finished), e.g. to time raw collectives on the same group.
  std::function<void(int rank, Communicator& comm)> after_run;
};

struct ShardedTrainResult {
  std::vector<float> losses;  // per step: the global batch's mean loss (every rank sees it)
  int64_t examples = 0;
  double seconds = 0;  // from the first step's push to the last step's end
  // The gathered state (above); where this process ran part of the ranks,
  // only the dense part (the tables' shards live in other processes).
  ModelState state;
  // Each of this process's ranks' collectives as the GPU ran them
  // (nccl.record_timings), in the order issued (the same on every rank).
  std::vector<std::vector<CollectiveTiming>> timings;
  // Each rank's cache statistics over the run (with a cache).
  std::vector<cache::CacheCounts> cache_totals;
};

ShardedTrainResult TrainSharded(const ShardedTrainOptions& options,
                                const std::function<std::unique_ptr<BatchSource>()>& data,
                                const std::function<void(int64_t step, float loss)>& on_step = {});

// TrainSharded where each rank reads its own local batches (B_l examples
// each, from `rank_data(r)`), as the ranks of several hosts read their
// part of the data, instead of slicing the same global batches: rank r's
// batch k is examples r * B_l .. (r + 1) * B_l - 1 of global batch k. The
// run ends when a rank's data ends (every rank's must end at the same
// batch). Throws InvalidArgument where the ranks' batch sizes differ.
ShardedTrainResult TrainShardedOnRankData(
    const ShardedTrainOptions& options,
    const std::function<std::unique_ptr<BatchSource>(int rank)>& rank_data,
    const std::function<void(int64_t step, float loss)>& on_step = {});

}  // namespace ember::train
