#pragma once

// Training metrics: what each step left (its loss, its examples, its wall
// time), recorded by the step's end marker, an engine op that runs once the
// step's ops are done (trainer.h); and their summary (percentiles of the
// step time, examples per second).
//
// A step's time is the wall time from the end of the previous step (or
// from the trainer's last Resume: the start, or the end of an evaluation
// or a checkpoint) to the end of this one. With batches in flight that is
// the pipeline's period, what throughput is made of.
//
// Thread safety: StepRecorder is thread-safe (markers record from engine
// workers, the training thread reads); the rest are plain values and pure
// functions. Memory ordering: a record made by a step's marker is visible
// to a thread that waited for that marker's var.

#include <chrono>
#include <cstdint>
#include <vector>

#include "engine/base/mutex.h"

namespace ember::train {

struct StepRecord {
  int64_t step = 0;
  float loss = 0.0f;
  int64_t examples = 0;
  double seconds = 0.0;      // the step's wall time (see above)
  double end_seconds = 0.0;  // when it ended, since the recorder was made
};

class StepRecorder {
 public:
  StepRecorder();  // the clock starts here
  StepRecorder(const StepRecorder&) = delete;
  StepRecorder& operator=(const StepRecorder&) = delete;

  // Records a step that ends now.
  void Record(int64_t step, float loss, int64_t examples);
  // The next step's time starts now (after a pause the step should not
  // be charged for).
  void Resume();

  [[nodiscard]] std::vector<StepRecord> Records() const;
  [[nodiscard]] double Elapsed() const;

 private:
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start_;
  mutable Mutex mu_;
  Clock::time_point last_ ABSL_GUARDED_BY(mu_);
  std::vector<StepRecord> records_ ABSL_GUARDED_BY(mu_);
};

// The value below which a fraction `p` (0..1) of `values` lies, by linear
// interpolation between the closest ranks; 0 for no values.
[[nodiscard]] double Percentile(std::vector<double> values, double p);

struct StepSummary {
  int64_t steps = 0;        // every record
  int64_t timed_steps = 0;  // those after the warm-up: the times below are theirs
  int64_t examples = 0;     // of the timed steps
  double seconds = 0.0;     // the timed steps' wall time, pauses excluded
  double p50_ms = 0.0;
  double p90_ms = 0.0;
  double examples_per_second = 0.0;
  float first_loss = 0.0f;
  float final_loss = 0.0f;
  // The mean loss of the last min(steps, 10%) steps, at least one: the
  // training loss at the end, less noisy than the last step's.
  double tail_loss = 0.0;
};

// The summary of `records`, whose first `warmup` steps (fewer when there
// are no more: the last step is always timed) are left out of the step
// times and examples/s, not of the losses. Why: the first steps of a run
// hold its start-up (CUDA and cuBLAS handles, first allocations, an empty
// pipeline and cache); on an H200 the first GPU step took 213-310 ms
// against 3.2 ms at the median, enough to lower a 300-step run's
// examples/s by a fifth.
[[nodiscard]] StepSummary Summarize(const std::vector<StepRecord>& records, int64_t warmup = 0);

}  // namespace ember::train
