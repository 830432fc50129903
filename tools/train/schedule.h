#pragma once

// Schedules: the order in which a training step's stages (dlrm_model.h)
// are pushed. A schedule is only a push order over the same ops; the ops'
// vars make the engine run what does not conflict at the same time, and
// the cache's rules (docs/cache.md) make each order safe:
//
//   baseline  batch after batch: Prefetch, EmbeddingForward, DenseForward,
//             DenseBackward, Relookup, EmbeddingBackward, DenseUpdate.
//   prefetch  Prefetch(i+1) pushed before the forward of batch i, so the
//             next batch's rows move while batch i computes; Relookup(i)
//             follows Prefetch(i+1) and precedes EmbeddingBackward(i).
//   fused     prefetch, and EmbeddingForward(i+1) pushed right after
//             EmbeddingBackward(i), before DenseUpdate(i): TorchRec's
//             fused pipeline on top of the prefetch pipeline; the lookup
//             overlaps the dense optimizer.
//   semisync  prefetch, and EmbeddingForward(i+1) pushed before
//             EmbeddingBackward(i) (after DenseForward(i)): batch i+1
//             reads rows without batch i's update where the two share
//             rows. Stale by design.
//
// baseline, prefetch and fused compute exactly the same values (each op
// reads what it reads in baseline: a row is read from its slot or its home,
// which hold the same value); semisync does not (docs/train.md).
//
// Thread safety: plain functions; one thread pushes a model's stages.

#include <string_view>
#include <vector>

#include "tools/train/batch_state.h"
#include "tools/train/dlrm_model.h"

namespace ember::train {

enum class Schedule { kBaseline, kPrefetch, kFused, kSemisync };

std::string_view ToString(Schedule schedule);
// "baseline", "prefetch", "fused" or "semisync"; throws InvalidArgument
// listing them.
Schedule ParseSchedule(std::string_view name);
// Every schedule, baseline first.
std::vector<Schedule> AllSchedules();

// The cache's link_warps (cache_options.h) that `schedule` runs best with:
// a pipelined schedule's prefetch runs beside the step's compute, which
// its row moves slow down, and takes 96 warps (the best of a sweep on an
// H100, docs/benchmarks.md); the baseline's runs alone, with the kernels'
// defaults (0: for a mapped home a block on every SM). Trainer uses it
// where ModelPlacement leaves link_warps at 0 (a value past the GPU's SMs
// asks for a block on each).
int LinkWarpsFor(Schedule schedule);

// Pushes the step of batch `cur` in `schedule`'s order, and the part of
// batch `next`'s step that the schedule pushes ahead (its prefetch or
// lookup). `next` is null at the end of the data and wherever the pipeline
// drains (before an evaluation, a checkpoint, a stop): then cur's step
// completes with nothing of a later batch pushed, and the batch after
// starts afresh (its state has neither flag set). What `cur` had pushed
// ahead by the previous step is not pushed again (BatchState::prefetched,
// embedded). REQUIRES: both uploaded (DlrmModel::Upload), distinct.
void PushStep(Schedule schedule, DlrmModel& model, BatchState& cur, BatchState* next);

}  // namespace ember::train
