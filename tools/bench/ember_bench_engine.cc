// ember-bench-engine: throughput and latency of every engine type, side by
// side with a oneTBB flow graph and StarPU running the same random DAG.
//
// Each of --repeat runs goes round the engines and the peers once, each in a
// child process of its own (--isolate), so that a slow spell of a shared
// machine hits every column alike and no column inherits another's heap or
// threads. The table shows the median of the runs (--stat=best: the best
// one); the ratios to the peers pair each engine run with the peer runs of
// the same round. The figures, table and JSON are in bench_report.h.
//
// Cases:
//   independent  --ops no-op ops with no vars: the cost of one push, dispatch
//                and completion, with nothing to order.
//   chain        --ops no-op ops that all write one var: every op waits for
//                the one before, so this is the dependency hand-off alone.
//   random DAG   MakeRandomWorkload(--dag_ops ops over --dag_vars vars, 2-19
//                reads each, no sleeps); each op computes ApplyOp (tens of
//                nanoseconds; the report says how many), and every run's
//                final data is checked against RunSerial. The peers run the
//                same ops.
//   latency      one op pushed on an idle engine at a time; the time from
//                before the push to the start of the op's function. The
//                pusher spins on a flag the op sets, so the engine is never
//                drained with WaitForAll between samples. "after idle" sleeps
//                --idle_gap_us between samples, so that workers go to sleep.
//   GPU cases    (--cases=gpu) chains, a fan-out/fan-in DAG and independent
//                ops of tiny kernels, beside the same kernels issued by hand;
//                see gpu_cases.h. Skipped, with a note, without a GPU.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/engine.h"
#include "engine/error.h"
#include "engine/testing/random_workload.h"
#include "tools/bench/bench_report.h"
#include "tools/bench/gpu_cases.h"
#include "tools/bench/starpu_peer.h"
#include "tools/bench/tbb_peer.h"

ABSL_FLAG(int64_t, ops, 1'000'000, "ops per run of the independent and chain cases");
ABSL_FLAG(int, dag_ops, 100'000, "ops of the random DAG");
ABSL_FLAG(int, dag_vars, 100, "vars of the random DAG");
ABSL_FLAG(uint64_t, seed, 1, "seed of the random DAG");
ABSL_FLAG(int, latency_samples, 20'000, "push-to-start samples per run, back to back");
ABSL_FLAG(int, idle_latency_samples, 1'000, "push-to-start samples per run after an idle gap");
ABSL_FLAG(int, idle_gap_us, 1'000, "the idle gap before each 'after idle' sample");
ABSL_FLAG(std::vector<std::string>, engines,
          std::vector<std::string>({"NaiveEngine", "ThreadedEngine", "ThreadedEnginePerDevice"}),
          "engines to run, by ENGINE_TYPE name");
ABSL_FLAG(std::vector<std::string>, peers, std::vector<std::string>({"tbb", "starpu"}),
          "peers to run on the random DAG: tbb, starpu");
ABSL_FLAG(int, pool_workers, 2, "ThreadedEngine: workers of the shared pool");
ABSL_FLAG(int, cpu_workers, 1, "ThreadedEnginePerDevice: normal CPU workers");
ABSL_FLAG(int, peer_threads, 2, "threads of the TBB peer and CPU workers of the StarPU peer");
ABSL_FLAG(int, repeat, 5, "runs of every case");
ABSL_FLAG(std::string, stat, "median", "how repeats are summarized: median or best");
ABSL_FLAG(bool, isolate, true, "run every engine or peer run in a child process of its own");
ABSL_FLAG(std::string, json, "", "also write every printed figure to this JSON file");
ABSL_FLAG(std::vector<std::string>, cases, std::vector<std::string>({"cpu", "gpu"}),
          "cases to run: cpu (every engine and the peers), gpu (GPU ops beside hand-written "
          "CUDA; skipped without a GPU)");
ABSL_FLAG(std::vector<std::string>, gpu_engines,
          std::vector<std::string>({"ThreadedEnginePerDevice", "ThreadedEnginePerDeviceAsync"}),
          "engines of the GPU cases, by ENGINE_TYPE name");
ABSL_FLAG(int, gpu_repeat, 3, "runs of every GPU case");
ABSL_FLAG(int, gpu_chain_ops, 20'000, "ops of the GPU chain");
ABSL_FLAG(std::vector<std::string>, gpu_chain_us, std::vector<std::string>({"0", "10"}),
          "kernel lengths of the GPU chain, in us; one case each");
ABSL_FLAG(std::string, gpu_chain_prop, "copy_to_gpu",
          "where every other op of the GPU chain runs: copy_to_gpu or gpu_prioritized");
ABSL_FLAG(int, gpu_dag_rounds, 2'000, "rounds of the GPU fan-out/fan-in DAG (0: skip it)");
ABSL_FLAG(int, gpu_fan_out, 8, "branches of each round of the GPU fan-out/fan-in DAG");
ABSL_FLAG(int, gpu_dag_kernel_us, 50, "kernel length of the GPU fan-out/fan-in DAG, in us");
ABSL_FLAG(int, gpu_independent_ops, 10'000, "ops of each GPU independent case");
ABSL_FLAG(std::vector<std::string>, gpu_independent_us,
          std::vector<std::string>({"0", "10", "100"}),
          "kernel lengths of the GPU independent ops, in us; one case each");
ABSL_FLAG(int, gpu_workers, 2, "normal GPU workers of the engines in the GPU cases");
ABSL_FLAG(int, gpu_event_pool_size, 0,
          "most CUDA events per stream of each engine of the GPU cases (0: engine default)");
ABSL_FLAG(std::string, gpu_profile_dir, "",
          "when set, every engine of the GPU cases writes its Chrome-trace profile there, "
          "named after the case, engine and run (profiling slows the engines)");

namespace ember::bench {
namespace {

using Clock = std::chrono::steady_clock;
using engine::testing::Workload;

constexpr char kTargetEngine[] = "ThreadedEnginePerDevice";

struct BenchOptions {
  int64_t ops = 0;
  engine::testing::WorkloadSpec dag;
  int latency_samples = 0;
  int idle_latency_samples = 0;
  int idle_gap_us = 0;
  std::vector<std::string> engines;
  bool run_tbb = false;
  bool run_starpu = false;
  int pool_workers = 0;
  int cpu_workers = 0;
  int peer_threads = 0;
  int repeat = 0;
  bool best = false;     // summarize repeats by the best one, not the median
  bool isolate = false;  // every run of an engine or peer in its own process
  std::string json_path;
  bool cpu_cases = false;
  bool gpu_cases = false;
  GpuBenchOptions gpu;
};

// A list flag of whole numbers, e.g. --gpu_chain_us=0,10.
std::vector<int> IntsFromFlag(const char* flag, const std::vector<std::string>& values) {
  std::vector<int> ints;
  for (const std::string& value : values) {
    if (value.empty()) continue;  // --gpu_chain_us= runs no chain
    int n = 0;
    if (!absl::SimpleAtoi(value, &n) || n < 0) {
      throw InvalidArgument(
          absl::StrCat("[ember-bench-engine] --", flag, ": '", value, "' is not a whole number"));
    }
    ints.push_back(n);
  }
  return ints;
}

GpuBenchOptions GpuOptionsFromFlags() {
  GpuBenchOptions gpu;
  gpu.engines = absl::GetFlag(FLAGS_gpu_engines);
  for (const std::string& name : gpu.engines) engine::ParseEngineType(name);  // throws if bad
  gpu.repeat = std::max(1, absl::GetFlag(FLAGS_gpu_repeat));
  gpu.chain_ops = std::max(2, absl::GetFlag(FLAGS_gpu_chain_ops));
  gpu.chain_us = IntsFromFlag("gpu_chain_us", absl::GetFlag(FLAGS_gpu_chain_us));
  const std::string prop = absl::GetFlag(FLAGS_gpu_chain_prop);
  if (prop != "copy_to_gpu" && prop != "gpu_prioritized") {
    throw InvalidArgument(absl::StrCat("[ember-bench-engine] --gpu_chain_prop='", prop,
                                       "'; valid: copy_to_gpu, gpu_prioritized"));
  }
  gpu.chain_prop =
      prop == "copy_to_gpu" ? engine::FnProperty::kCopyToGPU : engine::FnProperty::kGPUPrioritized;
  gpu.dag_rounds = std::max(0, absl::GetFlag(FLAGS_gpu_dag_rounds));
  gpu.fan_out = std::max(1, absl::GetFlag(FLAGS_gpu_fan_out));
  gpu.dag_kernel_us = std::max(0, absl::GetFlag(FLAGS_gpu_dag_kernel_us));
  gpu.independent_ops = std::max(1, absl::GetFlag(FLAGS_gpu_independent_ops));
  gpu.independent_us = IntsFromFlag("gpu_independent_us", absl::GetFlag(FLAGS_gpu_independent_us));
  gpu.gpu_workers = std::max(1, absl::GetFlag(FLAGS_gpu_workers));
  gpu.event_pool_size = std::max(0, absl::GetFlag(FLAGS_gpu_event_pool_size));
  gpu.profile_dir = absl::GetFlag(FLAGS_gpu_profile_dir);
  return gpu;
}

BenchOptions OptionsFromFlags() {
  BenchOptions options;
  options.ops = absl::GetFlag(FLAGS_ops);
  options.dag.num_ops = absl::GetFlag(FLAGS_dag_ops);
  options.dag.num_vars = absl::GetFlag(FLAGS_dag_vars);
  options.dag.seed = absl::GetFlag(FLAGS_seed);
  options.latency_samples = absl::GetFlag(FLAGS_latency_samples);
  options.idle_latency_samples = absl::GetFlag(FLAGS_idle_latency_samples);
  options.idle_gap_us = absl::GetFlag(FLAGS_idle_gap_us);
  options.engines = absl::GetFlag(FLAGS_engines);
  for (const std::string& name : options.engines) engine::ParseEngineType(name);  // throws if bad
  for (const std::string& peer : absl::GetFlag(FLAGS_peers)) {
    if (peer != "tbb" && peer != "starpu") {
      throw InvalidArgument(
          absl::StrCat("[ember-bench-engine] unknown peer '", peer, "'; valid: tbb, starpu"));
    }
    (peer == "tbb" ? options.run_tbb : options.run_starpu) = true;
  }
  options.pool_workers = absl::GetFlag(FLAGS_pool_workers);
  options.cpu_workers = absl::GetFlag(FLAGS_cpu_workers);
  options.peer_threads = absl::GetFlag(FLAGS_peer_threads);
  options.repeat = std::max(1, absl::GetFlag(FLAGS_repeat));
  const std::string stat = absl::GetFlag(FLAGS_stat);
  if (stat != "median" && stat != "best") {
    throw InvalidArgument(
        absl::StrCat("[ember-bench-engine] --stat='", stat, "'; valid: median, best"));
  }
  options.best = stat == "best";
  options.json_path = absl::GetFlag(FLAGS_json);
  options.isolate = absl::GetFlag(FLAGS_isolate);
  for (const std::string& name : absl::GetFlag(FLAGS_cases)) {
    if (name != "cpu" && name != "gpu") {
      throw InvalidArgument(
          absl::StrCat("[ember-bench-engine] unknown case set '", name, "'; valid: cpu, gpu"));
    }
    (name == "cpu" ? options.cpu_cases : options.gpu_cases) = true;
  }
  options.gpu = GpuOptionsFromFlags();
  return options;
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// ---------------------------------------------------------------------------
// The engine cases. Each returns ops/s or microseconds.

double IndependentOpsPerSecond(engine::Engine& engine, int64_t ops) {
  const auto start = Clock::now();
  for (int64_t i = 0; i < ops; ++i) {
    engine.PushAsync([](const engine::RunContext&, const engine::OnStart&,
                        const engine::OnComplete& on_complete) { on_complete(); },
                     {}, {});
  }
  engine.WaitForAll();
  return static_cast<double>(ops) / SecondsSince(start);
}

double ChainOpsPerSecond(engine::Engine& engine, int64_t ops) {
  const engine::VarHandle var = engine.NewVariable();
  const auto start = Clock::now();
  for (int64_t i = 0; i < ops; ++i) {
    engine.PushAsync([](const engine::RunContext&, const engine::OnStart&,
                        const engine::OnComplete& on_complete) { on_complete(); },
                     {}, {var});
  }
  engine.WaitForAll();
  const double rate = static_cast<double>(ops) / SecondsSince(start);
  engine.DeleteVariable(var);
  return rate;
}

// Pushes the ops as they come, reads with repeats and all: normalizing them
// is part of the engine's cost. Vars are made and deleted outside the timing.
double DagOpsPerSecond(engine::Engine& engine, const Workload& workload,
                       std::vector<uint64_t>* data) {
  *data = workload.initial;
  std::vector<engine::VarHandle> vars(workload.num_vars);
  for (auto& var : vars) var = engine.NewVariable();
  std::vector<engine::VarHandle> reads;
  const auto start = Clock::now();
  for (const engine::testing::WorkloadOp& op : workload.ops) {
    reads.clear();
    for (int var : op.reads) reads.push_back(vars[var]);
    engine.PushAsync(
        [&op, data](const engine::RunContext&, const engine::OnStart& on_start,
                    const engine::OnComplete& on_complete) {
          on_start();
          (*data)[op.write] = engine::testing::ApplyOp(op, *data);
          on_complete();
        },
        reads, {vars[op.write]});
  }
  engine.WaitForAll();
  const double rate = static_cast<double>(workload.ops.size()) / SecondsSince(start);
  for (auto var : vars) engine.DeleteVariable(var);
  engine.WaitForAll();
  return rate;
}

// Push-to-start times in microseconds, one op in flight at a time.
std::vector<double> PushToStartMicros(engine::Engine& engine, int samples, int gap_us) {
  std::vector<double> micros(samples);
  std::atomic<bool> started{false};
  Clock::time_point start_time;
  for (int i = 0; i < samples; ++i) {
    if (gap_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
    started.store(false, std::memory_order_relaxed);
    const auto push_time = Clock::now();
    engine.PushAsync(
        [&](const engine::RunContext&, const engine::OnStart&,
            const engine::OnComplete& on_complete) {
          start_time = Clock::now();
          started.store(true, std::memory_order_release);
          on_complete();
        },
        {}, {});
    // Spinning rather than WaitForAll keeps the waiting out of the engine.
    // After a while the spin yields: on a busy 2-core box a pure spin can
    // keep the very worker it waits for off the CPU.
    for (int spins = 0; !started.load(std::memory_order_acquire); ++spins) {
      if (spins > 10'000) std::this_thread::yield();
    }
    micros[i] = std::chrono::duration<double, std::micro>(start_time - push_time).count();
  }
  engine.WaitForAll();  // the last op may still be completing
  return micros;
}

// Records one run's figure for `c` and reports it on stderr.
void Record(const CaseSpec& c, const std::string& column, int run, double value, Results* results) {
  results->Add(c, column, value);
  absl::FPrintF(stderr, "[ember-bench-engine] run %d %-24s %-21s %.6g %s\n", run + 1, column, c.key,
                value, c.unit);
}

// One run of a latency case, recording its p50 and p99.
void RecordLatency(const CaseSpec& p50, const CaseSpec& p99, int samples, int gap_us,
                   engine::Engine& engine, const std::string& column, int run, Results* results) {
  if (samples <= 0) return;
  const std::vector<double> micros = PushToStartMicros(engine, samples, gap_us);
  Record(p50, column, run, Percentile(micros, 0.5), results);
  Record(p99, column, run, Percentile(micros, 0.99), results);
}

// True when `data` matches the serial run; says so on stderr otherwise,
// since a fast engine that breaks the order proves nothing.
bool CheckDag(const std::string& who, const std::vector<uint64_t>& data,
              const std::vector<uint64_t>& expected) {
  if (data == expected) return true;
  absl::FPrintF(stderr,
                "[ember-bench-engine] ERROR: %s: random DAG result differs from RunSerial\n", who);
  return false;
}

engine::EngineOptions EngineOptionsFor(const std::string& name, const BenchOptions& options) {
  engine::EngineOptions engine_options = engine::ParseEngineType(name);
  engine_options.pool_workers = options.pool_workers;
  engine_options.cpu_workers = options.cpu_workers;
  return engine_options;
}

// What one run of the bench shares: the DAG, its serial result, the figures.
struct RunState {
  const BenchOptions& options;
  const Workload& dag;
  const std::vector<uint64_t>& expected;
  int run = 0;
  Results results;
  bool dag_ok = true;  // every DAG result matched RunSerial
  std::string starpu_description;
};

// Every case, once, on a fresh engine `name`.
void RunEngineOnce(const std::string& name, RunState* state) {
  const BenchOptions& options = state->options;
  const int run = state->run;
  Results* results = &state->results;
  std::unique_ptr<engine::Engine> engine = engine::CreateEngine(EngineOptionsFor(name, options));
  IndependentOpsPerSecond(*engine, std::min<int64_t>(options.ops, 10'000));  // warm up
  Record(kIndependent, name, run, IndependentOpsPerSecond(*engine, options.ops), results);
  Record(kChain, name, run, ChainOpsPerSecond(*engine, options.ops), results);
  std::vector<uint64_t> data;
  Record(kDag, name, run, DagOpsPerSecond(*engine, state->dag, &data), results);
  state->dag_ok = CheckDag(name, data, state->expected) && state->dag_ok;
  RecordLatency(kLatencyP50, kLatencyP99, options.latency_samples, 0, *engine, name, run, results);
  RecordLatency(kIdleLatencyP50, kIdleLatencyP99, options.idle_latency_samples, options.idle_gap_us,
                *engine, name, run, results);
}

void RunTbbOnce(RunState* state) {
  std::vector<uint64_t> data = state->dag.initial;
  const double seconds = RunOnTbbFlowGraph(state->dag, state->options.peer_threads, &data);
  Record(kDag, kTbb, state->run, static_cast<double>(state->dag.ops.size()) / seconds,
         &state->results);
  state->dag_ok = CheckDag(kTbb, data, state->expected) && state->dag_ok;
}

// StarPU starts afresh each run (untimed): its idle workers poll, and would
// steal a core from the engines if it stayed up.
void RunStarPUOnce(RunState* state) {
  StarPUPeer starpu(state->options.peer_threads);
  std::vector<uint64_t> data = state->dag.initial;
  const double seconds = starpu.Run(state->dag, &data);
  Record(kDag, kStarPU, state->run, static_cast<double>(state->dag.ops.size()) / seconds,
         &state->results);
  state->dag_ok = CheckDag(kStarPU, data, state->expected) && state->dag_ok;
  state->starpu_description = starpu.description();
}

// The child's side of RunIsolated: runs `body`, writes its figures (and
// StarPU's description) to `fd` and exits: 0 for success, 1 for a wrong DAG
// result, 2 for an exception.
[[noreturn]] void RunChild(const RunState& parent, const std::function<void(RunState*)>& body,
                           int fd) {
  RunState state{parent.options, parent.dag, parent.expected, parent.run, Results(), true, ""};
  int status = 0;
  try {
    body(&state);
  } catch (const std::exception& e) {
    absl::FPrintF(stderr, "[ember-bench-engine] ERROR in run %d: %s\n", state.run + 1, e.what());
    status = 2;
  }
  const std::string text = absl::StrCat(state.starpu_description, "\n", state.results.Serialize());
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n <= 0) _exit(2);
    done += static_cast<size_t>(n);
  }
  std::fflush(stderr);
  _exit(status != 0 ? status : state.dag_ok ? 0 : 1);
}

// Runs `body` in a child process (--isolate) and merges the figures it
// records. A run in the same process would inherit the heap and threads of
// the runs before it: a NaiveEngine run after a ThreadedEngine run was ~30%
// slower than before it, so the order of the columns would show in them.
void RunIsolated(RunState* state, const std::function<void(RunState*)>& body) {
  if (!state->options.isolate) return body(state);
  int fds[2];
  if (pipe(fds) != 0) throw Error("[ember-bench-engine] pipe() failed");
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) throw Error("[ember-bench-engine] fork() failed");
  if (pid == 0) {
    close(fds[0]);
    RunChild(*state, body, fds[1]);
  }
  close(fds[1]);
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = read(fds[0], buffer, sizeof(buffer))) > 0;) text.append(buffer, n);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) > 1) {
    throw Error(absl::StrFormat("[ember-bench-engine] run %d failed (wait status %d)",
                                state->run + 1, status));
  }
  state->dag_ok = state->dag_ok && WEXITSTATUS(status) == 0;
  const size_t newline = text.find('\n');
  if (newline == std::string::npos) return;
  if (newline > 0) state->starpu_description = text.substr(0, newline);
  state->results.Merge(absl::string_view(text).substr(newline + 1));
}

// Runs are round-robin over the engines and peers, so that a slow spell of
// a shared machine hits every column alike. Returns a note per peer: what
// ran, or why it did not.
std::vector<std::string> RunAll(RunState* state) {
  const BenchOptions& options = state->options;
  const bool tbb = options.run_tbb && TbbPeerBuilt();
  const bool starpu = options.run_starpu && StarPUPeerBuilt();
  std::vector<std::string> notes;
  if (tbb) {
    notes.push_back(absl::StrCat(kTbb, ": ", TbbPeerDescription(), ", ", options.peer_threads,
                                 " threads, lightweight nodes, graph build timed"));
  } else if (options.run_tbb) {
    notes.push_back("TBB flow graph peer: not built (oneTBB not found or peers disabled)");
  }
  if (options.run_starpu && !starpu) {
    notes.push_back("StarPU peer: not built (starpu-1.3 not found or peers disabled)");
  }
  for (state->run = 0; state->run < options.repeat; ++state->run) {
    for (const std::string& name : options.engines) {
      RunIsolated(state, [&name](RunState* run) { RunEngineOnce(name, run); });
    }
    if (tbb) RunIsolated(state, RunTbbOnce);
    if (starpu) RunIsolated(state, RunStarPUOnce);
  }
  if (starpu) {
    notes.push_back(
        absl::StrCat(kStarPU, ": ", state->starpu_description, ", implicit data dependencies"));
  }
  return notes;
}

std::string JsonList(const std::vector<std::string>& values, bool quote) {
  std::vector<std::string> items;
  for (const std::string& value : values) items.push_back(quote ? JsonString(value) : value);
  return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
}

std::string JsonGpuOptions(const GpuBenchOptions& gpu) {
  return absl::StrFormat(
      "{\"engines\": %s, \"repeat\": %d, \"chain_ops\": %d, \"chain_us\": [%s], "
      "\"chain_prop\": %s, \"dag_rounds\": %d, \"fan_out\": %d, \"dag_kernel_us\": %d, "
      "\"independent_ops\": %d, \"independent_us\": [%s], \"gpu_workers\": %d, "
      "\"event_pool_size\": %d}",
      JsonList(gpu.engines, true), gpu.repeat, gpu.chain_ops, absl::StrJoin(gpu.chain_us, ", "),
      JsonString(engine::ToString(gpu.chain_prop)), gpu.dag_rounds, gpu.fan_out, gpu.dag_kernel_us,
      gpu.independent_ops, absl::StrJoin(gpu.independent_us, ", "), gpu.gpu_workers,
      gpu.event_pool_size);
}

// The options as a JSON object, for the report.
std::string JsonOptions(const BenchOptions& options) {
  std::vector<std::string> engines;
  for (const std::string& name : options.engines) engines.push_back(JsonString(name));
  std::vector<std::string> cases;
  if (options.cpu_cases) cases.push_back("cpu");
  if (options.gpu_cases) cases.push_back("gpu");
  return absl::StrFormat(
      "{\"ops\": %d, \"dag_ops\": %d, \"dag_vars\": %d, \"seed\": %d, \"latency_samples\": %d, "
      "\"idle_latency_samples\": %d, \"idle_gap_us\": %d, \"engines\": [%s], \"pool_workers\": "
      "%d, \"cpu_workers\": %d, \"peer_threads\": %d, \"repeat\": %d, \"stat\": %s, "
      "\"isolate\": %s, \"cases\": %s, \"gpu\": %s}",
      options.ops, options.dag.num_ops, options.dag.num_vars, options.dag.seed,
      options.latency_samples, options.idle_latency_samples, options.idle_gap_us,
      absl::StrJoin(engines, ", "), options.pool_workers, options.cpu_workers, options.peer_threads,
      options.repeat, JsonString(options.best ? "best" : "median"),
      options.isolate ? "true" : "false", JsonList(cases, true), JsonGpuOptions(options.gpu));
}

// ---------------------------------------------------------------------------

// The machine's load before the runs: on a shared box, a busy neighbour
// shows in every figure.
std::string LoadNote() {
  double load[3] = {0, 0, 0};
  const int n = getloadavg(load, 3);
  return absl::StrFormat("%d hardware threads, load average %.2f at start",
                         std::thread::hardware_concurrency(), n > 0 ? load[0] : NAN);
}

// CPU seconds the whole machine has been busy (Linux /proc/stat), and this
// process with its children: the difference over the runs is what other
// processes took, which a 2-core box shows in every figure.
double MachineBusySeconds() {
  std::FILE* file = std::fopen("/proc/stat", "r");
  if (file == nullptr) return NAN;
  unsigned long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0;
  const int fields = std::fscanf(file, "cpu %llu %llu %llu %llu %llu %llu %llu", &user, &nice,
                                 &system, &idle, &iowait, &irq, &softirq);
  std::fclose(file);
  if (fields != 7) return NAN;
  return static_cast<double>(user + nice + system + irq + softirq) /
         static_cast<double>(sysconf(_SC_CLK_TCK));
}

double OwnBusySeconds() {
  double seconds = 0;
  for (int who : {RUSAGE_SELF, RUSAGE_CHILDREN}) {
    rusage usage{};
    getrusage(who, &usage);
    for (const timeval& t : {usage.ru_utime, usage.ru_stime}) {
      seconds += static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec);
    }
  }
  return seconds;
}

// How much of the machine other processes used while the runs went on.
std::string NeighbourNote(double machine_start, double own_start, Clock::time_point start) {
  const double others = (MachineBusySeconds() - machine_start) - (OwnBusySeconds() - own_start);
  const double share = others / (SecondsSince(start) * std::thread::hardware_concurrency());
  if (std::isnan(share)) return "other processes' CPU use during the runs: unknown";
  if (share > 0.05) {
    absl::FPrintF(stderr, "[ember-bench-engine] WARNING: other processes used %.0f%% of the CPUs\n",
                  100 * share);
  }
  return absl::StrFormat("other processes used %.1f%% of the CPUs during the runs",
                         100 * std::max(0.0, share));
}

// Every CPU case: fills `spec` and `results`; false if a DAG result was
// wrong.
bool RunCpuCases(const BenchOptions& options, ReportSpec* out, Results* results) {
  const std::string load_note = LoadNote();
  absl::FPrintF(stderr, "[ember-bench-engine] %s; making the random DAG (%d ops)\n", load_note,
                options.dag.num_ops);
  const Workload dag = engine::testing::MakeRandomWorkload(options.dag);
  const auto serial_start = Clock::now();
  const std::vector<uint64_t> expected = engine::testing::RunSerial(dag);
  const double serial_ns = 1e9 * SecondsSince(serial_start) / static_cast<double>(dag.ops.size());

  RunState state{options, dag, expected, /*run=*/0, Results(), /*dag_ok=*/true, ""};
  const double machine_start = MachineBusySeconds();
  const double own_start = OwnBusySeconds();
  const auto start = Clock::now();
  ReportSpec& spec = *out;
  spec.notes = RunAll(&state);
  spec.notes.push_back(NeighbourNote(machine_start, own_start, start));
  spec.dag_ok = state.dag_ok;
  spec.engines = options.engines;
  spec.best = options.best;
  spec.ops = options.ops;
  spec.dag_ops = options.dag.num_ops;
  spec.dag_vars = options.dag.num_vars;
  spec.idle_gap_us = options.idle_gap_us;
  // The op bodies' own cost, to set against the per-op cost of each column.
  spec.notes.push_back(
      absl::StrFormat("op body alone (RunSerial, one thread): %.0f ns/op", serial_ns));
  spec.notes.push_back(absl::StrFormat(
      "%s; %s of %d runs%s; ThreadedEngine pool_workers=%d, PerDevice cpu_workers=%d", load_note,
      options.best ? "best" : "median", options.repeat,
      options.isolate ? ", each in its own process" : "", options.pool_workers,
      options.cpu_workers));
  if (!state.dag_ok) spec.notes.push_back("ERROR: a random DAG result differed from RunSerial");
  *results = std::move(state.results);
  return state.dag_ok;
}

// The GPU cases run after the CPU ones, in this process: the CPU cases fork,
// and a child forked after CUDA is initialized cannot use it.
int Main(const BenchOptions& options) {
  ReportSpec spec;
  Results results;
  bool ok = true;
  if (options.cpu_cases) ok = RunCpuCases(options, &spec, &results);
  spec.target_engine = kTargetEngine;
  spec.options_json = JsonOptions(options);
  if (options.gpu_cases) {
    GpuCasesResult gpu = RunGpuCases(options.gpu);
    spec.tables.push_back(std::move(gpu.table));
    ok = ok && gpu.counts_ok;
  }
  Report(spec, std::move(results), options.json_path);
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace ember::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Engine throughput and latency, with oneTBB flow graph and StarPU peers on a random DAG.\n"
      "Usage: ember-bench-engine [--cases=cpu,gpu] [--ops=N] [--engines=A,B] [--repeat=R] "
      "[--json=PATH]");
  absl::ParseCommandLine(argc, argv);
  try {
    return ember::bench::Main(ember::bench::OptionsFromFlags());
  } catch (const std::exception& e) {
    absl::FPrintF(stderr, "ember-bench-engine: %s\n", e.what());
    return 2;
  }
}
