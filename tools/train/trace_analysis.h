#pragma once

// What a Chrome trace of training steps (the engine's profile,
// docs/profiling.md) says about a schedule: how busy each row was (a
// worker thread, or on a GPU a CUDA stream, whose spans are device time),
// the busiest row's busy time per step (the schedule's bound: no push
// order makes a step shorter than the work of its busiest stream), and
// which stages of consecutive steps actually ran at the same time, and how
// long any row was busy.
//
// Stages are found by their ops' names and counted in order: the k-th
// CachedTbe::Prefetch span is batch k's prefetch, the k-th
// EmbeddingBagForward its embedding forward (the cache runs ops' TBE ops on
// its rows), and so on (dlrm_model.h lists each stage's ops). A dense stage is the window of its
// named ops: forward(i) from its first ConcatColumns to its SigmoidBinaryCrossEntropy, backward(i)
// from its first to its second SplitColumns, update(i) its optimizer ops. That holds for a trace of
// training steps without evaluation (whose forward shares those names): the runtime's traced runs.
//
// Thread safety: functions of their arguments.

#include <cstdint>
#include <string>
#include <vector>

#include "tools/train/json.h"

namespace ember::train {

struct TraceSpan {
  std::string name;
  uint64_t row = 0;
  double begin_us = 0.0;
  double end_us = 0.0;
};

struct ChromeTrace {
  std::vector<std::pair<uint64_t, std::string>> rows;  // id, name ("ember-cpu", "gpu0 stream 3")
  std::vector<TraceSpan> spans;                        // complete events ("ph": "X")
};

// Reads a Chrome trace file as the engine writes it. Throws
// InvalidArgument "[ReadChromeTrace] PATH: ..." for a missing or malformed
// file.
[[nodiscard]] ChromeTrace ReadChromeTrace(const std::string& path);

struct RowBusy {
  std::string row;
  double busy_us = 0.0;  // the union of its spans, within the steps' window
  int64_t spans = 0;
  std::string top_ops;  // its ops with the most time, e.g. "Matmul 41%, CachedTbe::Forward 20%"
};

struct StageOverlap {
  std::string what;        // e.g. "prefetch(i+1) | forward(i)"
  int64_t pairs = 0;       // steps where both stages were found
  int64_t overlapped = 0;  // of those, the steps where they overlapped
  double overlap_us = 0.0;
};

struct TraceAnalysis {
  int64_t steps = 0;               // steps analyzed (Trainer::StepEnd markers in the window)
  double window_us = 0.0;          // from the first analyzed prefetch to the last step's end
  bool device_rows = false;        // the rows are CUDA streams (device time)
  std::vector<RowBusy> rows;       // busiest first
  double bound_us_per_step = 0.0;  // the busiest row's busy time / steps
  std::string bound_row;
  // The time any row was busy (the union of every row's spans) per step:
  // with device rows, the GPU's busy time. A step near it is bound by the
  // GPU's whole work, streams sharing the SMs, and no push order shortens
  // it; a step well above it waits on the host or on hand-overs.
  double busy_us_per_step = 0.0;
  std::vector<StageOverlap> overlaps;
};

// Analyzes `trace` (see above), leaving out its first `skip_steps` steps
// (a warm-up: cold caches, first allocations). Rows are CUDA streams when
// the trace has any (device time), else threads.
[[nodiscard]] TraceAnalysis AnalyzeTrace(const ChromeTrace& trace, int64_t skip_steps = 0);

[[nodiscard]] Json ToJson(const TraceAnalysis& analysis);

}  // namespace ember::train
