#pragma once

// Sharded schedules: the order in which the stages of a ShardedDlrm
// (sharded_dlrm.h) are pushed for consecutive batches, TorchRec's
// pipelines as push orders over the same ops. Every rank pushes the same
// schedule, so every rank issues the same collectives in the same order
// (collective_ops.h); the vars make the engine overlap the rest.
//
//   baseline     batch after batch: ExchangeLengths, DistributeIndices,
//                Lookup, DenseForward, DenseBackward, EmbeddingBackward,
//                DenseUpdate.
//   sparse-dist  batch i+1's input distribution overlaps batch i
//                (TrainPipelineSparseDist): its indices pushed after
//                DenseForward(i), its lengths a step earlier (with batch
//                i+2's pushed right after Lookup(i)), so that the host
//                wait for them in DistributeIndices finds them arrived: a
//                collective runs after those pushed before it, and lengths
//                pushed within step i would wait for batch i-1's backward
//                collectives, which held the pushing thread and the GPU's
//                queue to one step (measured: the push of a step took the
//                whole step on the host). After Lookup(i), not before it:
//                batch i's pooled rows would otherwise wait for the
//                packing of batch i+2's lengths, a CPU op. With an
//                embedding cache, batch i+1's Prefetch right after its
//                indices, before batch i's backward: the rows' moves
//                overlap batch i (the prefetch schedule of schedule.h;
//                TorchRec's prefetch pipeline), and batch i's Relookup
//                follows it as the cache requires.
//   fused        sparse-dist, with the Lookup of batch i+1 pushed after
//                EmbeddingBackward(i) and AllReduceDense(i), before
//                DenseOptimizer(i): it overlaps the dense optimizer
//                (TorchRec's fused pipeline). Its lengths, indices and
//                prefetch go out as in sparse-dist.
//   semisync     the prefetch and lookup of batch i+1 pushed after
//                DenseForward(i), before the backward of batch i: batch
//                i+1 reads rows without batch i's update. Stale by design.
//
// baseline, sparse-dist and fused compute the same values; semisync
// computes what the single-GPU semisync schedule (schedule.h) computes.
//
// Thread safety: plain functions; one thread pushes a rank's stages.

#include <string_view>
#include <vector>

#include "tools/train/dist/sharded_dlrm.h"
#include "tools/train/schedule.h"

namespace ember::train {

enum class ShardedSchedule { kBaseline, kSparseDist, kFused, kSemisync };

std::string_view ToString(ShardedSchedule schedule);
// "baseline", "sparse-dist", "fused" or "semisync"; throws InvalidArgument
// listing them.
ShardedSchedule ParseShardedSchedule(std::string_view name);
// Every sharded schedule, baseline first.
std::vector<ShardedSchedule> AllShardedSchedules();

// The single-process schedule (schedule.h) that computes the same values:
// baseline's for sparse-dist (the distribution reads no weights).
Schedule SingleProcessTwin(ShardedSchedule schedule);

// Pushes the step of batch `cur` in `schedule`'s order, and the part of
// batches `next` and `after_next` (i+1, i+2) that the schedule pushes
// ahead: the pipelined schedules send after_next's lengths. Either is null
// at the end of the data and wherever the pipeline drains (after_next
// also where a caller keeps one batch ahead only). REQUIRES: all three
// uploaded (ShardedDlrm::Upload), distinct; `cur.state.step` set.
void PushShardedStep(ShardedSchedule schedule, ShardedDlrm& model, ShardedBatch& cur,
                     ShardedBatch* next, ShardedBatch* after_next = nullptr);

}  // namespace ember::train
