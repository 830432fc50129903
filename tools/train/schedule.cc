#include "tools/train/schedule.h"

#include <fmt/format.h>

#include "engine/error.h"

namespace ember::train {
namespace {

// What a schedule pushed ahead for a batch is skipped; the rest of its
// lookup is pushed now (the first batch, or the first after a drain).
void EnsurePrefetched(DlrmModel& m, BatchState& b) {
  if (!b.prefetched) m.Prefetch(b);
}
void EnsureLookedUp(DlrmModel& m, BatchState& b) {
  EnsurePrefetched(m, b);
  if (!b.embedded) m.EmbeddingForward(b);
}

// One function per schedule: the push order is the schedule.

void PushBaseline(DlrmModel& m, BatchState& cur, BatchState* /*next*/) {
  EnsureLookedUp(m, cur);
  m.DenseForward(cur);
  m.DenseBackward(cur);
  m.Relookup(cur);
  m.EmbeddingBackward(cur);
  m.DenseUpdate(cur);
}

void PushPrefetch(DlrmModel& m, BatchState& cur, BatchState* next) {
  EnsurePrefetched(m, cur);
  if (next != nullptr) m.Prefetch(*next);  // before forward(i): overlaps it
  m.EmbeddingForward(cur);
  m.DenseForward(cur);
  m.DenseBackward(cur);
  m.Relookup(cur);  // after Prefetch(i+1), before Backward(i)
  m.EmbeddingBackward(cur);
  m.DenseUpdate(cur);
}

// fused and semisync build on prefetch: Prefetch(i+1) is pushed as there,
// and only EmbeddingForward(i+1) moves.

void PushFused(DlrmModel& m, BatchState& cur, BatchState* next) {
  EnsureLookedUp(m, cur);
  if (next != nullptr) m.Prefetch(*next);  // overlaps batch i's dense work
  m.DenseForward(cur);
  m.DenseBackward(cur);
  m.Relookup(cur);  // after Prefetch(i+1), before Backward(i)
  m.EmbeddingBackward(cur);
  if (next != nullptr) m.EmbeddingForward(*next);  // after the update it must see
  m.DenseUpdate(cur);                              // overlaps EmbeddingForward(i+1)
}

void PushSemisync(DlrmModel& m, BatchState& cur, BatchState* next) {
  EnsureLookedUp(m, cur);
  if (next != nullptr) m.Prefetch(*next);
  m.DenseForward(cur);
  // Before Backward(i): batch i+1 reads rows without batch i's update.
  if (next != nullptr) m.EmbeddingForward(*next);
  m.DenseBackward(cur);
  m.Relookup(cur);  // after Prefetch(i+1), before Backward(i)
  m.EmbeddingBackward(cur);
  m.DenseUpdate(cur);
}

}  // namespace

std::string_view ToString(Schedule schedule) {
  switch (schedule) {
    case Schedule::kBaseline:
      return "baseline";
    case Schedule::kPrefetch:
      return "prefetch";
    case Schedule::kFused:
      return "fused";
    case Schedule::kSemisync:
      return "semisync";
  }
  return "?";
}

Schedule ParseSchedule(std::string_view name) {
  for (Schedule s : AllSchedules()) {
    if (name == ToString(s)) return s;
  }
  throw InvalidArgument(fmt::format(
      "[ParseSchedule] unknown schedule '{}'; valid: baseline, prefetch, fused, semisync", name));
}

std::vector<Schedule> AllSchedules() {
  return {Schedule::kBaseline, Schedule::kPrefetch, Schedule::kFused, Schedule::kSemisync};
}

int LinkWarpsFor(Schedule schedule) { return schedule == Schedule::kBaseline ? 0 : 96; }

void PushStep(Schedule schedule, DlrmModel& model, BatchState& cur, BatchState* next) {
  switch (schedule) {
    case Schedule::kBaseline:
      return PushBaseline(model, cur, next);
    case Schedule::kPrefetch:
      return PushPrefetch(model, cur, next);
    case Schedule::kFused:
      return PushFused(model, cur, next);
    case Schedule::kSemisync:
      return PushSemisync(model, cur, next);
  }
}

}  // namespace ember::train
