// ember-stress: runs a random workload on the engine chosen by ENGINE_TYPE,
// checks the result against a serial run and prints the throughput.
//
//   ENGINE_TYPE=ThreadedEngine ember-stress --ops 1000000 --push_threads 2
//
// Exits 0 when the engine's result equals the serial one, 1 when it does not,
// 2 on a usage or engine error. Every flag, EMBER_LOG_LEVEL, ENGINE_TYPE and
// ENGINE_PROFILE are checked before any work starts.

#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <string>

#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/flags/usage.h>

#include "engine/engine.h"
#include "engine/error.h"
#include "engine/testing/random_workload.h"
#include "tools/train/tool_checks.h"

ABSL_FLAG(int64_t, ops, 1000000, "number of ops to push");
ABSL_FLAG(int, vars, 100, "number of written vars");
ABSL_FLAG(int, const_vars, 16, "number of read-only vars");
ABSL_FLAG(int, push_threads, 1, "threads pushing ops concurrently (disjoint partitions)");
ABSL_FLAG(double, sleep_probability, 0.0, "chance that an op sleeps");
ABSL_FLAG(int, max_sleep_us, 20, "longest sleep of a sleeping op, in microseconds");
ABSL_FLAG(bool, random_properties, true, "mix FnProperty values and priorities");
ABSL_FLAG(bool, mix_push_kinds, true, "mix PushAsync, PushSync and NewOperator+Push");
ABSL_FLAG(uint64_t, seed, 42, "workload seed");

namespace {

using ember::engine::testing::RunOptions;
using ember::engine::testing::WorkloadSpec;

struct StressOptions {
  WorkloadSpec spec;
  RunOptions run;
};

// Throws InvalidArgument "--flag=value ..." unless lo <= value <= hi.
template <typename T>
void CheckRange(const char* flag, T value, T lo, T hi) {
  if (value >= lo && value <= hi) return;
  throw ember::InvalidArgument("--" + std::string(flag) + "=" + std::to_string(value) +
                               " is out of range [" + std::to_string(lo) + ", " +
                               std::to_string(hi) + "]");
}

// Every flag checked before any work (a negative count used to reach the
// workload as a huge size: "vector::_M_default_append").
void CheckFlags() {
  CheckRange<int64_t>("ops", absl::GetFlag(FLAGS_ops), 1, std::numeric_limits<int>::max());
  CheckRange("vars", absl::GetFlag(FLAGS_vars), 1, 1 << 24);
  CheckRange("const_vars", absl::GetFlag(FLAGS_const_vars), 0, 1 << 24);
  // Each pushing thread owns a partition of the vars: at least one each.
  CheckRange("push_threads", absl::GetFlag(FLAGS_push_threads), 1,
             std::min(1024, absl::GetFlag(FLAGS_vars)));
  CheckRange("sleep_probability", absl::GetFlag(FLAGS_sleep_probability), 0.0, 1.0);
  CheckRange("max_sleep_us", absl::GetFlag(FLAGS_max_sleep_us), 0, 1000000);
}

StressOptions OptionsFromFlags() {
  StressOptions options;
  WorkloadSpec& spec = options.spec;
  spec.num_ops = static_cast<int>(absl::GetFlag(FLAGS_ops));
  spec.num_vars = absl::GetFlag(FLAGS_vars);
  spec.num_const_vars = absl::GetFlag(FLAGS_const_vars);
  spec.num_partitions = absl::GetFlag(FLAGS_push_threads);
  spec.sleep_probability = absl::GetFlag(FLAGS_sleep_probability);
  spec.max_sleep_us = absl::GetFlag(FLAGS_max_sleep_us);
  spec.random_properties = absl::GetFlag(FLAGS_random_properties);
  spec.random_priorities = spec.random_properties;
  spec.seed = absl::GetFlag(FLAGS_seed);
  options.run.push_threads = spec.num_partitions;
  options.run.mix_push_kinds = absl::GetFlag(FLAGS_mix_push_kinds);
  return options;
}

// A one-line progress bar on stderr, redrawn in place on a terminal and
// printed every 10% otherwise (logs of CI runs stay short).
class ProgressBar {
 public:
  explicit ProgressBar(int64_t total) : total_(total), tty_(isatty(STDERR_FILENO) != 0) {}
  // Called from every pushing thread.
  void Update(int64_t done) {
    std::lock_guard<std::mutex> lock(mu_);
    const int percent = static_cast<int>(100 * done / std::max<int64_t>(total_, 1));
    if (tty_) {
      const int filled = percent / 4;
      std::fprintf(stderr, "\r[%s%s] %3d%% pushed", std::string(filled, '#').c_str(),
                   std::string(25 - filled, ' ').c_str(), percent);
    } else if (percent / 10 > last_decile_) {
      last_decile_ = percent / 10;
      std::fprintf(stderr, "pushed %d%%\n", percent);
    }
  }
  void Finish() {
    if (tty_) std::fprintf(stderr, "\n");
  }

 private:
  const int64_t total_;
  const bool tty_;
  std::mutex mu_;
  int last_decile_ = 0;
};

int Run(const StressOptions& options) {
  using Clock = std::chrono::steady_clock;
  ember::engine::Engine& engine = ember::engine::Engine::Get();
  std::printf("engine %s, %d ops over %d vars, %d pushing thread(s)\n",
              std::string(engine.name()).c_str(), options.spec.num_ops, options.spec.num_vars,
              options.run.push_threads);
  std::fflush(stdout);  // before the progress lines on stderr
  const auto workload = ember::engine::testing::MakeRandomWorkload(options.spec);
  const auto expected = ember::engine::testing::RunSerial(workload);

  ProgressBar bar(options.spec.num_ops);
  RunOptions run = options.run;
  run.progress = [&bar](int64_t pushed) { bar.Update(pushed); };
  const auto start = Clock::now();
  const auto actual = ember::engine::testing::RunOnEngine(engine, workload, run);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  bar.Finish();

  const bool ok = actual == expected;
  std::printf("%.0f ops/s (%.3f s); check against the serial run: %s\n",
              options.spec.num_ops / seconds, seconds, ok ? "PASSED" : "FAILED");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Runs a random workload on the engine chosen by ENGINE_TYPE and checks it against a "
      "serial run.");
  absl::ParseCommandLine(argc, argv);
  StressOptions options;
  try {
    ember::tools::CheckEnvironment();
    CheckFlags();
    options = OptionsFromFlags();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ember-stress: %s\n", e.what());
    return 2;
  }
  try {
    return Run(options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ember-stress: %s\n", e.what());
    return 2;
  }
}
