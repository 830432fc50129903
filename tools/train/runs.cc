#include "tools/train/runs.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include <fmt/format.h>

#include "engine/error.h"

namespace ember::train {
namespace {

int64_t HomeBytes(DlrmModel& model) {
  const Tensor& home = model.tbe().home();
  int64_t bytes = static_cast<int64_t>(home.bytes());
  for (Tensor* state : {&model.tbe().accumulator(), &model.tbe().adam_m(), &model.tbe().adam_v()}) {
    if (*state && state->kind() == home.kind()) bytes += static_cast<int64_t>(state->bytes());
  }
  return bytes;
}

}  // namespace

RunReport TrainAndReport(engine::Engine& engine, const TrainOptions& options,
                         const DataFactory& data, const RunHooks& hooks, int64_t warmup) {
  RunReport report;
  report.schedule = std::string(ToString(options.schedule));
  report.engine = std::string(engine.name());
  report.device = options.placement.ctx.ToString();
  report.model = options.model.Describe();
  ResetMemoryPeaks(options.placement.ctx);  // the peaks of this run only
  Trainer trainer(engine, options, data.train(), data.held_out ? data.held_out() : nullptr);
  report.batch_size = 0;
  report.result = trainer.Run(hooks);
  for (const StepRecord& r : report.result.records) {
    report.batch_size = std::max(report.batch_size, r.examples);
  }
  report.steps = Summarize(report.result.records, warmup);
  report.home_bytes = HomeBytes(trainer.model());
  report.cache_slots = trainer.model().tbe().num_slots();
  report.memory = MemoryUsage(options.placement.ctx);
  return report;
}

std::optional<TraceAnalysis> TraceSteps(const TrainOptions& options,
                                        engine::EngineOptions engine_options,
                                        const std::string& trace_path, int64_t steps,
                                        int64_t warmup, const DataFactory& data,
                                        const std::atomic<bool>* stop) {
  TrainOptions traced = options;
  traced.steps = warmup + steps;
  traced.eval_every = 0;
  traced.log_every = 0;
  traced.checkpoint_dir.clear();
  traced.checkpoint_every = 0;
  traced.resume = false;
  engine_options.profile_path = trace_path;
  {
    // The engine writes the trace when it goes, after the trainer's
    // tensors (declared after it) are gone.
    std::unique_ptr<engine::Engine> engine = engine::CreateEngine(engine_options);
    Trainer trainer(*engine, traced, data.train(), nullptr);
    RunHooks hooks;
    hooks.stop = stop;
    if (trainer.Run(hooks).stopped) return std::nullopt;
  }
  return AnalyzeTrace(ReadChromeTrace(trace_path), warmup);
}

std::vector<RunReport> CompareSchedules(const CompareOptions& options, const DataFactory& data,
                                        const RunHooks& hooks,
                                        const std::function<void(const RunReport&)>& on_run) {
  std::vector<RunReport> reports;
  for (Schedule schedule : AllSchedules()) {
    if (hooks.stop != nullptr && hooks.stop->load()) break;
    TrainOptions train = options.train;
    train.schedule = schedule;
    RunReport report;
    {
      std::unique_ptr<engine::Engine> engine = engine::CreateEngine(options.engine);
      report = TrainAndReport(*engine, train, data, hooks, options.warmup);
    }
    if (options.trace_steps > 0 && !(hooks.stop != nullptr && hooks.stop->load())) {
      report.trace_path = (std::filesystem::path(options.trace_dir) /
                           fmt::format("trace-{}.json", ToString(schedule)))
                              .string();
      report.trace = TraceSteps(train, options.engine, report.trace_path, options.trace_steps,
                                options.trace_warmup, data, hooks.stop);
    }
    if (on_run) on_run(report);
    reports.push_back(std::move(report));
  }
  return reports;
}

}  // namespace ember::train
