#include "tools/train/metrics.h"

#include <algorithm>
#include <cmath>

namespace ember::train {

StepRecorder::StepRecorder() : start_(Clock::now()), last_(start_) {}

void StepRecorder::Record(int64_t step, float loss, int64_t examples) {
  const Clock::time_point now = Clock::now();
  MutexLock lock(&mu_);
  records_.push_back({.step = step,
                      .loss = loss,
                      .examples = examples,
                      .seconds = std::chrono::duration<double>(now - last_).count(),
                      .end_seconds = std::chrono::duration<double>(now - start_).count()});
  last_ = now;
}

void StepRecorder::Resume() {
  MutexLock lock(&mu_);
  last_ = Clock::now();
}

std::vector<StepRecord> StepRecorder::Records() const {
  MutexLock lock(&mu_);
  return records_;
}

double StepRecorder::Elapsed() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const double rank = std::clamp(p, 0.0, 1.0) * static_cast<double>(values.size() - 1);
  const auto low = static_cast<std::size_t>(std::floor(rank));
  const std::size_t high = std::min(low + 1, values.size() - 1);
  return values[low] + (values[high] - values[low]) * (rank - static_cast<double>(low));
}

StepSummary Summarize(const std::vector<StepRecord>& records, int64_t warmup) {
  StepSummary s;
  if (records.empty()) return s;
  s.steps = static_cast<int64_t>(records.size());
  const auto first_timed = static_cast<std::size_t>(std::clamp<int64_t>(warmup, 0, s.steps - 1));
  std::vector<double> times;
  for (std::size_t i = first_timed; i < records.size(); ++i) {
    times.push_back(records[i].seconds);
    s.examples += records[i].examples;
    s.seconds += records[i].seconds;
  }
  s.timed_steps = static_cast<int64_t>(times.size());
  s.p50_ms = 1e3 * Percentile(times, 0.5);
  s.p90_ms = 1e3 * Percentile(times, 0.9);
  s.examples_per_second = s.seconds > 0 ? static_cast<double>(s.examples) / s.seconds : 0.0;
  s.first_loss = records.front().loss;
  s.final_loss = records.back().loss;
  const std::size_t tail = std::max<std::size_t>(1, records.size() / 10);
  double sum = 0.0;
  for (std::size_t i = records.size() - tail; i < records.size(); ++i) sum += records[i].loss;
  s.tail_loss = sum / static_cast<double>(tail);
  return s;
}

}  // namespace ember::train
