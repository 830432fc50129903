#include "tools/train/trainer.h"

#include <algorithm>
#include <exception>
#include <utility>

#include <absl/strings/str_join.h>
#include <fmt/format.h>

#include "engine/base/logging.h"
#include "tools/train/auc.h"
#include "tools/train/checkpoint.h"
#include "tools/train/data/loader.h"
#include "tools/train/schedule.h"

namespace ember::train {
namespace {

[[noreturn]] void BadOption(const std::string& what) {
  throw InvalidArgument(fmt::format("[TrainOptions] {}", what));
}

void CheckData(const ModelConfig& model, const DataSpec& spec, std::string_view which) {
  if (spec.num_dense == model.num_dense && spec.rows == model.table_rows) return;
  throw InvalidArgument(
      fmt::format("[Trainer] the {} data has {} dense features and {} tables of [{}] rows; the "
                  "model takes {} and {} of [{}]",
                  which, spec.num_dense, spec.num_tables(), absl::StrJoin(spec.rows, ", "),
                  model.num_dense, model.num_tables(), absl::StrJoin(model.table_rows, ", ")));
}

// The placement, with the cache's link_warps chosen for the schedule
// where it is left at 0 (LinkWarpsFor).
ModelPlacement PlacementFor(const TrainOptions& options) {
  ModelPlacement placement = options.placement;
  if (placement.cache.link_warps == 0) placement.cache.link_warps = LinkWarpsFor(options.schedule);
  return placement;
}

}  // namespace

void TrainOptions::Validate() const {
  model.Validate();
  if (steps < 0) BadOption(fmt::format("steps = {} is negative", steps));
  if (eval_every < 0) BadOption(fmt::format("eval_every = {} is negative", eval_every));
  if (eval_batches < 0) BadOption(fmt::format("eval_batches = {} is negative", eval_batches));
  if (log_every < 0) BadOption(fmt::format("log_every = {} is negative", log_every));
  if (checkpoint_every < 0) {
    BadOption(fmt::format("checkpoint_every = {} is negative", checkpoint_every));
  }
  if (checkpoint_every > 0 && checkpoint_dir.empty()) {
    BadOption("checkpoint_every needs a checkpoint directory");
  }
  if (resume && checkpoint_dir.empty()) BadOption("resume needs a checkpoint directory");
  if (pipeline_depth < 2 || pipeline_depth > 64) {
    BadOption(fmt::format("pipeline_depth = {} is not in [2, 64]", pipeline_depth));
  }
  if (loader_depth < 1 || loader_depth > 1024) {
    BadOption(fmt::format("loader_depth = {} is not in [1, 1024]", loader_depth));
  }
  if (loader_threads < 0 || loader_threads > 256) {
    BadOption(fmt::format("loader_threads = {} is not in [0, 256]", loader_threads));
  }
}

// One run: the ring of batch states, the recorder, and the loop over them.
class Trainer::Loop {
 public:
  Loop(Trainer& trainer, const RunHooks& hooks)
      : t_(trainer),
        o_(trainer.options_),
        model_(*trainer.model_),
        engine_(trainer.engine_),
        hooks_(hooks),
        memory_{&trainer.engine_, o_.placement.ctx.is_gpu() ? storage::MemoryKind::kPinned
                                                            : storage::MemoryKind::kCpu},
        ring_(static_cast<std::size_t>(o_.pipeline_depth)) {}

  TrainResult Run() {
    if (t_.train_ == nullptr) throw UsageError("[Trainer::Run] called twice");
    if (o_.resume) {
      const CheckpointPoint point = LoadCheckpoint(model_, o_.checkpoint_dir);
      // steps counts from the start: a total below the checkpoint's would
      // train nothing and report success.
      if (o_.steps > 0 && o_.steps < point.step) {
        throw InvalidArgument(fmt::format(
            "[Trainer] the checkpoint in '{}' is at step {}, past the {} steps asked for (steps "
            "count from the start of training, not from the checkpoint)",
            o_.checkpoint_dir, point.step, o_.steps));
      }
      step_ = point.step;
      position_ = point.position;
      t_.train_->Seek(position_);
    } else {
      model_.Initialize();
      position_ = t_.train_->position();
    }
    loader_ = std::make_unique<Loader>(
        engine_, std::move(t_.train_),
        LoaderOptions{.depth = o_.loader_depth,
                      .threads = o_.loader_threads,
                      .kind = memory_.kind,
                      .check = [this](const HostBatch& batch) { model_.CheckBatch(batch); }});
    result_.first_step = step_;
    reported_ = step_;
    recorder_.Resume();  // step times start now, not at the initialization
    try {
      TrainSteps();
      // The checkpoint comes before the evaluation, so that held-out data
      // that fails (a bad line, a file gone) costs no training.
      if (!o_.checkpoint_dir.empty() && last_checkpoint_ != step_) Checkpoint();
      // A stopped run skips the final evaluation: it was asked to end.
      if (t_.held_out_ != nullptr && !result_.stopped &&
          (result_.evals.empty() || result_.evals.back().step != step_)) {
        Evaluate();
      }
      WaitAll();
    } catch (...) {
      // Nothing pushed is left running when the error leaves: wait for it,
      // logging what else failed (the first failure is the one thrown).
      try {
        engine_.WaitForAll();
      } catch (const std::exception& e) {
        Log().warn("[Trainer] after the failure, also: {}", e.what());
      }
      throw;
    }
    result_.steps = step_ - result_.first_step;
    result_.position = position_;
    result_.records = recorder_.Records();
    for (const StepRecord& r : result_.records) result_.examples += r.examples;
    result_.cache = model_.tbe().TotalStats();
    return std::move(result_);
  }

 private:
  [[nodiscard]] bool StopRequested() const {
    return hooks_.stop != nullptr && hooks_.stop->load(std::memory_order_relaxed);
  }

  // Runs `push` (a step's pushes), naming the step in what it throws.
  template <typename F>
  void AtStep(int64_t step, F&& push) {
    try {
      push();
    } catch (const TrainError&) {
      throw;
    } catch (const std::exception& e) {
      throw TrainError(fmt::format("[Trainer] step {}: {}", step, e.what()), step);
    }
  }

  // Waits for the end marker of the batch in `state`: its step is done.
  void WaitStep(const BatchState& state) {
    AtStep(state.step, [&] { engine_.WaitForVar(state.done.var()); });
  }
  // Waits for step `step`'s marker, unless its state was reused since (a
  // reuse waited for it).
  void WaitFor(int64_t step) {
    const BatchState& state = ring_[static_cast<std::size_t>(step % o_.pipeline_depth)];
    if (state.step == step) WaitStep(state);
  }

  void WaitAll() {
    AtStep(step_, [&] { engine_.WaitForAll(); });
  }

  // The next batch, unless the run has its steps.
  std::optional<HostBatch> Fetch(int64_t step) {
    if (o_.steps > 0 && step >= o_.steps) return std::nullopt;
    std::optional<HostBatch> batch;
    AtStep(step, [&] { batch = loader_->Pop(); });
    return batch;
  }

  // Uploads batch `step` into its state of the ring, once the batch that
  // used that state last is done (the bound on batches in flight).
  BatchState& Admit(int64_t step, const HostBatch& batch) {
    BatchState& state = ring_[static_cast<std::size_t>(step % o_.pipeline_depth)];
    if (state.step >= 0) WaitStep(state);
    // The loader's threads checked the batch (Run's LoaderOptions::check).
    AtStep(step, [&] { model_.Upload(state, batch, /*checked=*/true); });
    state.step = step;
    return state;
  }

  // The step's end: a CPU op after every op of the step (it reads what
  // they write last), recording its loss and time.
  void PushMarker(BatchState& state) {
    const Tensor& loss = model_.HostLoss(state);
    std::vector<engine::VarHandle> reads = model_.StepOutputVars();
    reads.push_back(loss.var());
    engine_.PushSync(
        [recorder = &recorder_, loss = loss.data<float>(), done = state.done.data<int64_t>(),
         step = state.step, examples = state.examples](engine::RunContext) {
          *done = step;
          recorder->Record(step, *loss, examples);
        },
        reads, {state.done.var()},
        {.ctx = engine::Context::CPU(),
         .prop = engine::FnProperty::kNormal,
         .name = "Trainer::StepEnd"});
  }

  void TrainSteps() {
    BatchState* cur = nullptr;
    if (std::optional<HostBatch> first = Fetch(step_)) cur = &Admit(step_, *first);
    while (cur != nullptr) {
      const int64_t step = cur->step;
      const bool stop = StopRequested();
      const bool eval_due =
          t_.held_out_ != nullptr && o_.eval_every > 0 && (step + 1) % o_.eval_every == 0;
      const bool checkpoint_due = !o_.checkpoint_dir.empty() && o_.checkpoint_every > 0 &&
                                  (step + 1) % o_.checkpoint_every == 0;
      BatchState* next = nullptr;
      if (!stop) {
        if (std::optional<HostBatch> batch = Fetch(step + 1)) next = &Admit(step + 1, *batch);
      }
      // Draining: no look-ahead into the next batch, so every batch in
      // flight finishes its step here.
      const bool drain = next == nullptr || eval_due || checkpoint_due;
      AtStep(step, [&] {
        PushStep(o_.schedule, model_, *cur, drain ? nullptr : next);
        PushMarker(*cur);
      });
      step_ = step + 1;
      position_ = cur->position;
      if (drain) {
        WaitStep(*cur);
        if (checkpoint_due) Checkpoint();  // first: a failed evaluation loses no training
        if (eval_due) Evaluate();
        if (eval_due || checkpoint_due) recorder_.Resume();
      }
      // Progress lags a step behind the pushes, so that its wait never
      // leaves the device without work.
      if (o_.log_every > 0 && step > result_.first_step && step % o_.log_every == 0) {
        Report(step, step);
      }
      if (stop) result_.stopped = true;
      cur = next;
    }
    if (o_.log_every > 0 && reported_ < step_) Report(step_, step_ - 1);
  }

  // A progress report on the steps since the last one, up to `steps` done.
  // The cache's statistics wait for every op pushed on its state, up to
  // step `pushed` (and its look-ahead): an error there is that step's.
  void Report(int64_t steps, int64_t pushed) {
    WaitFor(steps - 1);
    const std::vector<StepRecord> records = recorder_.Records();
    Progress p;
    p.step = steps;
    p.total_steps = o_.steps;
    double loss = 0.0, seconds = 0.0;
    int64_t examples = 0, count = 0;
    for (const StepRecord& r : records) {
      if (r.step < reported_ || r.step >= steps) continue;
      loss += r.loss;
      seconds += r.seconds;
      examples += r.examples;
      ++count;
    }
    p.loss = count > 0 ? loss / static_cast<double>(count) : 0.0;
    p.examples_per_second = seconds > 0 ? static_cast<double>(examples) / seconds : 0.0;
    cache::CacheCounts total;
    AtStep(pushed, [&] { total = model_.tbe().TotalStats().all; });
    cache::CacheCounts window = total;
    window.unique -= reported_counts_.unique;
    window.unique_misses -= reported_counts_.unique_misses;
    if (window.unique > 0) p.cache_hit_rate = window.hit_rate();
    reported_counts_ = total;
    reported_ = steps;
    if (hooks_.on_progress) hooks_.on_progress(p);
  }

  // Evaluation on the held-out data: two batches in flight, forward only.
  void Evaluate() {
    EvalResult r;
    r.step = step_;
    std::vector<float> scores, labels;
    double loss_sum = 0.0;
    BatchState states[2];
    std::optional<HostBatch> held[2];
    auto collect = [&](int slot) {
      BatchState& s = states[slot];
      const HostBatch& batch = *held[slot];
      s.host_probs.WaitToRead();
      model_.HostLoss(s).WaitToRead();
      const float* probs = s.host_probs.data<float>();
      const float* y = batch.labels.data<float>();
      scores.insert(scores.end(), probs, probs + batch.batch_size);
      labels.insert(labels.end(), y, y + batch.batch_size);
      loss_sum += static_cast<double>(*model_.HostLoss(s).data<float>()) *
                  static_cast<double>(batch.batch_size);
      held[slot].reset();
    };
    const std::string where = fmt::format("evaluation after step {}", step_);
    bool stopped = false;
    try {
      t_.held_out_->Seek(0);  // the same examples at every evaluation
      for (int64_t k = 0; o_.eval_batches == 0 || k < o_.eval_batches; ++k) {
        // A stop request ends a long evaluation too, at its next batch.
        stopped = StopRequested();
        if (stopped) break;
        std::optional<HostBatch> batch = t_.held_out_->Next(memory_);
        if (!batch) break;
        const int slot = static_cast<int>(k % 2);
        if (held[slot]) collect(slot);
        model_.Upload(states[slot], *batch);
        model_.EvaluationForward(states[slot]);
        held[slot] = std::move(batch);
      }
      for (int slot : {0, 1}) {
        if (held[slot]) collect(slot);
      }
    } catch (const std::exception& e) {
      throw TrainError(fmt::format("[Trainer] {}: {}", where, e.what()), step_);
    }
    if (stopped) {  // a part of the held-out data is no evaluation of it
      Log().info("[Trainer] {} stopped after {} examples by the stop request; not reported", where,
                 scores.size());
      return;
    }
    r.examples = static_cast<int64_t>(scores.size());
    r.loss = r.examples > 0 ? loss_sum / static_cast<double>(r.examples) : 0.0;
    r.auc = RocAuc(scores, labels);
    result_.evals.push_back(r);
    if (hooks_.on_eval) hooks_.on_eval(r);
  }

  void Checkpoint() {
    AtStep(step_, [&] { SaveCheckpoint(model_, o_.checkpoint_dir, {step_, position_}); });
    last_checkpoint_ = step_;
    const std::string path = CheckpointPath(o_.checkpoint_dir);
    result_.checkpoints.push_back(path);
    if (hooks_.on_checkpoint) hooks_.on_checkpoint(path, step_);
  }

  Trainer& t_;
  const TrainOptions& o_;
  DlrmModel& model_;
  engine::Engine& engine_;
  const RunHooks& hooks_;
  const BatchMemory memory_;
  std::unique_ptr<Loader> loader_;  // runs the training source
  std::vector<BatchState> ring_;
  StepRecorder recorder_;
  TrainResult result_;
  int64_t step_ = 0;      // steps done
  int64_t position_ = 0;  // the data position after them
  int64_t last_checkpoint_ = -1;
  int64_t reported_ = 0;  // steps covered by progress reports
  cache::CacheCounts reported_counts_;
};

Trainer::Trainer(engine::Engine& engine, const TrainOptions& options,
                 std::unique_ptr<BatchSource> train, std::unique_ptr<BatchSource> held_out)
    : engine_(engine), options_(options), train_(std::move(train)), held_out_(std::move(held_out)) {
  options_.Validate();
  if (train_ == nullptr) throw InvalidArgument("[Trainer] no training data");
  CheckData(options_.model, train_->spec(), "training");
  if (held_out_ != nullptr) CheckData(options_.model, held_out_->spec(), "held-out");
  model_ = std::make_unique<DlrmModel>(engine_, options_.model, PlacementFor(options_));
}

Trainer::~Trainer() = default;

TrainResult Trainer::Run(const RunHooks& hooks) {
  Loop loop(*this, hooks);
  return loop.Run();
}

}  // namespace ember::train
