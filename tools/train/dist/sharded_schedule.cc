#include "tools/train/dist/sharded_schedule.h"

#include <fmt/format.h>

#include "engine/error.h"

namespace ember::train {
namespace {

void EnsureLengthsSent(ShardedDlrm& m, ShardedBatch* b) {
  if (b != nullptr && !b->lengths_sent) m.ExchangeLengths(*b);
}

// Batch i+1's lengths if not yet sent (the first step), then batch i+2's:
// see sharded_schedule.h, sparse-dist, for why a step ahead.
void SendLengthsAhead(ShardedDlrm& m, ShardedBatch* next, ShardedBatch* after_next) {
  EnsureLengthsSent(m, next);
  EnsureLengthsSent(m, after_next);
}

void EnsureDistributed(ShardedDlrm& m, ShardedBatch* b) {
  EnsureLengthsSent(m, b);
  if (b != nullptr && !b->distributed) m.DistributeIndices(*b);
}

void EnsurePrefetched(ShardedDlrm& m, ShardedBatch* b) {
  EnsureDistributed(m, b);
  if (b != nullptr && !b->prefetched) m.Prefetch(*b);
}

void EnsureLookedUp(ShardedDlrm& m, ShardedBatch* b) {
  EnsurePrefetched(m, b);
  if (b != nullptr && !b->embedded) m.Lookup(*b);
}

void PushBackward(ShardedDlrm& m, ShardedBatch& b) {
  m.DenseBackward(b);
  m.EmbeddingBackward(b);
}

void PushBaseline(ShardedDlrm& m, ShardedBatch& cur) {
  EnsureLookedUp(m, &cur);
  m.DenseForward(cur);
  PushBackward(m, cur);
  m.DenseUpdate(cur);
}

// Batch i+2's lengths go out right after batch i's lookup (its pooled
// rows' exchange first: the lengths' packing is a CPU op of a millisecond
// or two, which their collective, and every collective after it, would
// wait for); batch i+1's indices after batch i's forward, and its cache
// prefetch right after them, before batch i's backward (which the cache
// then lets follow it), so that the rows' moves overlap batch i.
void PushSparseDist(ShardedDlrm& m, ShardedBatch& cur, ShardedBatch* next,
                    ShardedBatch* after_next) {
  EnsureLookedUp(m, &cur);
  SendLengthsAhead(m, next, after_next);
  m.DenseForward(cur);
  EnsurePrefetched(m, next);
  PushBackward(m, cur);
  m.DenseUpdate(cur);
}

// fused builds on sparse-dist: the input distribution and the prefetch
// are pushed as there, and only the lookup of batch i+1 moves, between
// batch i's all-reduce and its dense optimizer: after the embedding update
// it must see, and after the all-reduce, which would otherwise wait
// behind its pooled rows' exchange (collectives run in push order).
void PushFused(ShardedDlrm& m, ShardedBatch& cur, ShardedBatch* next, ShardedBatch* after_next) {
  EnsureLookedUp(m, &cur);
  SendLengthsAhead(m, next, after_next);
  m.DenseForward(cur);
  EnsurePrefetched(m, next);
  PushBackward(m, cur);
  m.AllReduceDense(cur);
  EnsureLookedUp(m, next);  // overlaps DenseOptimizer(i)
  m.DenseOptimizer(cur);
}

void PushSemisync(ShardedDlrm& m, ShardedBatch& cur, ShardedBatch* next, ShardedBatch* after_next) {
  EnsureLookedUp(m, &cur);
  SendLengthsAhead(m, next, after_next);
  m.DenseForward(cur);
  EnsureLookedUp(m, next);  // before Backward(i): reads rows without i's update
  PushBackward(m, cur);
  m.DenseUpdate(cur);
}

}  // namespace

std::string_view ToString(ShardedSchedule schedule) {
  switch (schedule) {
    case ShardedSchedule::kBaseline:
      return "baseline";
    case ShardedSchedule::kSparseDist:
      return "sparse-dist";
    case ShardedSchedule::kFused:
      return "fused";
    case ShardedSchedule::kSemisync:
      return "semisync";
  }
  return "?";
}

ShardedSchedule ParseShardedSchedule(std::string_view name) {
  for (ShardedSchedule s : AllShardedSchedules()) {
    if (name == ToString(s)) return s;
  }
  throw InvalidArgument(fmt::format(
      "[ParseShardedSchedule] unknown schedule '{}'; valid: baseline, sparse-dist, fused, semisync",
      name));
}

std::vector<ShardedSchedule> AllShardedSchedules() {
  return {ShardedSchedule::kBaseline, ShardedSchedule::kSparseDist, ShardedSchedule::kFused,
          ShardedSchedule::kSemisync};
}

Schedule SingleProcessTwin(ShardedSchedule schedule) {
  switch (schedule) {
    case ShardedSchedule::kFused:
      return Schedule::kFused;
    case ShardedSchedule::kSemisync:
      return Schedule::kSemisync;
    case ShardedSchedule::kBaseline:
    case ShardedSchedule::kSparseDist:
      return Schedule::kBaseline;
  }
  return Schedule::kBaseline;
}

void PushShardedStep(ShardedSchedule schedule, ShardedDlrm& model, ShardedBatch& cur,
                     ShardedBatch* next, ShardedBatch* after_next) {
  if (next == nullptr) after_next = nullptr;  // a drain: nothing ahead
  switch (schedule) {
    case ShardedSchedule::kBaseline:
      return PushBaseline(model, cur);
    case ShardedSchedule::kSparseDist:
      return PushSparseDist(model, cur, next, after_next);
    case ShardedSchedule::kFused:
      return PushFused(model, cur, next, after_next);
    case ShardedSchedule::kSemisync:
      return PushSemisync(model, cur, next, after_next);
  }
}

}  // namespace ember::train
