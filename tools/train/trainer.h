#pragma once

// Trainer: runs a DlrmModel over a BatchSource in a schedule's push order
// (schedule.h), with held-out evaluation, checkpoints and a clean stop.
//
// The loop. The training source runs on a loader thread (data/loader.h)
// that fills a bounded queue ahead of the step. Step i takes batch i from
// it, uploads it into one of
// `pipeline_depth` BatchStates (a ring), pushes its stages in the
// schedule's order (with the next batch's look-ahead, already uploaded),
// and then pushes the step's end marker: a CPU op that reads the step's
// outputs (the loss on the host, the dense parameters, the tables) and
// records the step's loss and time (metrics.h). Before a state is reused
// the trainer waits for the marker of the batch that last used it, so at
// most pipeline_depth batches are in flight and the host never runs ahead
// of the device by more. Nothing else waits, except progress lines,
// evaluations and checkpoints, which read values.
//
// Draining. At the end of the data, at `steps`, before an evaluation or a
// checkpoint, and on a stop request, the step is pushed with no next
// batch: no look-ahead is pushed, so every batch in flight completes its
// step (none is dropped), and the trainer waits for the last marker. The
// pipeline then refills from the next batch.
//
// Errors. An op that fails marks what it writes; the ops after it that
// read those vars are skipped and pass the error on, to the end marker of
// its step or a later one. The trainer then stops pushing, waits for
// everything pushed (so nothing is left running), and throws TrainError
// naming the step and the op's own message ("[Trainer] step 7: [CachedTbe
// ::Prefetch] table 1, bag 3: index ..."): a run never goes on past a
// failed step. A bad batch (an index out of range, a shape that does not
// fit) is found on the host when it is uploaded and names its own step; an
// op failing on the device is reported at the first marker that reads its
// outputs, its step or, for a look-ahead op of the next batch, the step
// before.
//
// Thread safety: a Trainer is used by one thread; `stop` may be set from
// any thread (a signal handler).

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cache/cache_stats.h"
#include "engine/engine.h"
#include "engine/error.h"
#include "tools/train/data/batch_source.h"
#include "tools/train/dlrm_model.h"
#include "tools/train/metrics.h"
#include "tools/train/schedule.h"

namespace ember::train {

// A failed step: its message names the step and carries the op's error.
class TrainError : public Error {
 public:
  TrainError(const std::string& message, int64_t step) : Error(message), step_(step) {}
  [[nodiscard]] int64_t step() const { return step_; }

 private:
  int64_t step_;
};

struct TrainOptions {
  ModelConfig model;
  ModelPlacement placement;
  Schedule schedule = Schedule::kBaseline;
  // Steps to train, counted from the start of the run (a resumed run
  // continues to this total); 0: until the data ends.
  int64_t steps = 0;
  // Evaluate on the held-out data every so many steps (0: only at the
  // end), on at most eval_batches batches (0: all of it).
  int64_t eval_every = 0;
  int64_t eval_batches = 0;
  // A progress report every so many steps (0: none).
  int64_t log_every = 0;
  // Checkpoints in checkpoint_dir every checkpoint_every steps (0: only at
  // the end or a stop), when checkpoint_dir is set; resume from the
  // checkpoint there first.
  std::string checkpoint_dir;
  int64_t checkpoint_every = 0;
  bool resume = false;
  // Batches in flight (BatchStates in the ring), at least 2, and batches
  // the loader makes ahead.
  int pipeline_depth = 3;
  int loader_depth = 4;
  // The loader's threads (LoaderOptions::threads; 0: all the cores but
  // four, at most 16).
  int loader_threads = 0;

  // Throws InvalidArgument "[TrainOptions] ..." naming the first bad
  // option (negative counts, a depth below 2, resume without a
  // directory), and what ModelConfig::Validate throws.
  void Validate() const;
};

struct Progress {
  int64_t step = 0;         // steps done
  int64_t total_steps = 0;  // TrainOptions::steps, or 0
  double loss = 0.0;        // mean over the steps since the last report
  double examples_per_second = 0.0;
  // Of the prefetches since the last report; unset where there were none.
  std::optional<double> cache_hit_rate;
};

struct EvalResult {
  int64_t step = 0;  // steps trained when it ran
  int64_t examples = 0;
  double loss = 0.0;  // mean over the examples
  double auc = 0.0;
};

struct TrainResult {
  int64_t first_step = 0;  // > 0 after a resume
  int64_t steps = 0;       // trained in this run
  int64_t examples = 0;
  int64_t position = 0;  // the data position at the end
  std::vector<StepRecord> records;
  std::vector<EvalResult> evals;         // the last is the final one
  cache::CacheStats cache;               // since the model was made
  bool stopped = false;                  // by a stop request
  std::vector<std::string> checkpoints;  // written, in order (the same path each time)
};

struct RunHooks {
  // Set (by a signal handler) to finish the step in flight and stop.
  const std::atomic<bool>* stop = nullptr;
  std::function<void(const Progress&)> on_progress;
  std::function<void(const EvalResult&)> on_eval;
  std::function<void(const std::string& path, int64_t step)> on_checkpoint;
};

class Trainer {
 public:
  // Makes the model (parameters uninitialized until Run). The training
  // data is read from where `train` stands (a resume seeks it to the
  // checkpoint's position); `held_out` (null: no evaluation) is read from
  // its start at each evaluation. Throws InvalidArgument for bad options,
  // or data whose shape (dense features, tables and their rows) is not the
  // model's. REQUIRES: `engine` outlives the trainer.
  Trainer(engine::Engine& engine, const TrainOptions& options, std::unique_ptr<BatchSource> train,
          std::unique_ptr<BatchSource> held_out);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Initializes the model (or loads the checkpoint, with options.resume),
  // trains, evaluates at the end (unless stopped) and, with a checkpoint
  // directory, writes a checkpoint at the end. Blocks until everything it
  // pushed is done. Call once.
  // Throws TrainError for a failed step (see "Errors"), InvalidArgument
  // for a checkpoint that does not load, what the sources throw.
  TrainResult Run(const RunHooks& hooks = {});

  [[nodiscard]] DlrmModel& model() { return *model_; }
  [[nodiscard]] const TrainOptions& options() const { return options_; }

 private:
  class Loop;

  engine::Engine& engine_;
  const TrainOptions options_;
  std::unique_ptr<BatchSource> train_;  // lent to the loader during Run
  std::unique_ptr<BatchSource> held_out_;
  std::unique_ptr<DlrmModel> model_;
};

}  // namespace ember::train
