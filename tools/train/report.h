#pragma once

// What a run reports: the progress line during training, the summary at
// its end (step-time percentiles, throughput, memory per device, cache
// statistics, final loss and AUC), the side-by-side comparison of
// schedules, and all of it as JSON.
//
// Thread safety: plain values and functions of their arguments, except
// MemoryUsage, which reads the storage managers' statistics (thread-safe).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/context.h"
#include "tools/train/json.h"
#include "tools/train/metrics.h"
#include "tools/train/trace_analysis.h"
#include "tools/train/trainer.h"

namespace ember::train {

// One storage manager's bytes (storage/memory.h's MemoryStats).
struct MemoryUse {
  std::string where;  // "gpu(0) device", "host pinned", "host"
  int64_t allocated = 0;
  int64_t reserved = 0;
  int64_t peak_allocated = 0;
  int64_t peak_reserved = 0;
};

// The process-wide managers a run on `ctx` uses: host memory; pinned
// memory and the GPU's device pool when there is a GPU. (The tables' home
// rows come from the cache's own manager: RunReport::home_bytes.)
[[nodiscard]] std::vector<MemoryUse> MemoryUsage(engine::Context ctx);
// Resets those managers' peaks (StorageManager::ResetPeaks), so that the
// next MemoryUsage reports the peaks of what ran in between.
void ResetMemoryPeaks(engine::Context ctx);

struct RunReport {
  std::string schedule;
  std::string engine;
  std::string device;
  std::string model;  // ModelConfig::Describe()
  int64_t batch_size = 0;
  int64_t home_bytes = 0;   // the tables' rows and the optimizer state kept beside them
  int64_t cache_slots = 0;  // rows the cache holds
  StepSummary steps;
  TrainResult result;
  std::vector<MemoryUse> memory;
  std::optional<TraceAnalysis> trace;  // of a traced run of the same options
  std::string trace_path;
};

// "step 200/1000  loss 0.4812  51.2k ex/s  cache hit 97.1%".
[[nodiscard]] std::string FormatProgress(const Progress& p);
[[nodiscard]] std::string FormatEval(const EvalResult& r);
// The summary: several lines, ending with a newline.
[[nodiscard]] std::string FormatSummary(const RunReport& r);
// Every run side by side (the first is the reference of the ratios:
// baseline), with each one's bound and overlapped stages from its trace.
[[nodiscard]] std::string FormatComparison(const std::vector<RunReport>& runs);

[[nodiscard]] Json ToJson(const RunReport& r);

}  // namespace ember::train
