#pragma once

// The runs ember-train makes, as library calls: a training run with its
// report; a short traced run on an engine of its own that profiles (so the
// trace holds a few steps, not the whole run, and profiling never slows
// the timed run); and every schedule run on the same data and compared.
//
// Each run makes its own sources through a DataFactory, so that runs see
// the same examples from the start.
//
// Thread safety: one run at a time per thread; `stop` may be set from any
// thread.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/engine_options.h"
#include "tools/train/data/batch_source.h"
#include "tools/train/report.h"
#include "tools/train/trace_analysis.h"
#include "tools/train/trainer.h"

namespace ember::train {

struct DataFactory {
  // The training data, from its start. Required.
  std::function<std::unique_ptr<BatchSource>()> train;
  // The held-out data; empty: no evaluation.
  std::function<std::unique_ptr<BatchSource>()> held_out;
};

// Trains `options` on `engine` and reports it (the summary's figures, its
// first `warmup` steps left out of the step times: see Summarize; the
// memory the run used: the managers' peaks are reset when it starts).
// Throws what Trainer throws.
RunReport TrainAndReport(engine::Engine& engine, const TrainOptions& options,
                         const DataFactory& data, const RunHooks& hooks = {}, int64_t warmup = 0);

// Trains `warmup + steps` steps of `options` (no evaluation, no
// checkpoint) on a new engine made from `engine_options` with its profile
// written to `trace_path` when the engine goes, reads that trace back and
// analyzes its last `steps` steps (the warm-up's cold caches and first
// allocations left out). Nullopt when `stop` (as RunHooks::stop) ends the
// run first: a few steps are no trace of the schedule. Throws what Trainer
// throws, and InvalidArgument for an unreadable trace.
std::optional<TraceAnalysis> TraceSteps(const TrainOptions& options,
                                        engine::EngineOptions engine_options,
                                        const std::string& trace_path, int64_t steps,
                                        int64_t warmup, const DataFactory& data,
                                        const std::atomic<bool>* stop = nullptr);

struct CompareOptions {
  TrainOptions train;  // its schedule is replaced by each one's
  engine::EngineOptions engine;
  int64_t warmup = 0;  // each schedule's steps left out of its step times
  int64_t trace_steps = 10;
  int64_t trace_warmup = 10;
  // Where each schedule's trace goes: <trace_dir>/trace-<schedule>.json.
  std::string trace_dir;
};

// Runs every schedule (baseline first) on a fresh engine each, with
// `options.train`, then traces trace_steps steps of each (after
// trace_warmup steps); `on_run` sees
// each report as it is done. A stop request ends the comparison after the
// run in progress.
std::vector<RunReport> CompareSchedules(const CompareOptions& options, const DataFactory& data,
                                        const RunHooks& hooks = {},
                                        const std::function<void(const RunReport&)>& on_run = {});

}  // namespace ember::train
