#include "tools/bench/engine/cpu_cases.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/engine.h"
#include "engine/error.h"
#include "engine/testing/random_workload.h"
#include "tools/bench/common/machine_notes.h"
#include "tools/bench/engine/cpu_table.h"
#include "tools/bench/engine/engine_cases.h"
#include "tools/bench/engine/forked_run.h"
#include "tools/bench/engine/starpu_peer.h"
#include "tools/bench/engine/tbb_peer.h"

namespace ember::bench {
namespace {

using engine::testing::Workload;

// What one round shares: the DAG, its serial result, the figures.
struct RunState {
  const EngineBenchOptions& options;
  const Workload& dag;
  const std::vector<uint64_t>& expected;
  int run = 0;
  Results results;
  bool dag_ok = true;  // every DAG result matched RunSerial
  std::string starpu_description;
};

// Records one run's figure and reports it on stderr.
void Record(const CpuCase& c, const std::string& column, RunState* state, double value) {
  state->results.Add(c.key, column, value);
  absl::FPrintF(stderr, "[ember-bench-engine] run %d %-24s %-21s %.6g %s\n", state->run + 1, column,
                c.key, value, c.unit);
}

void RecordLatency(const CpuCase& p50, const CpuCase& p99, int samples, int gap_us,
                   engine::Engine& engine, const std::string& column, RunState* state) {
  if (samples <= 0) return;
  const std::vector<double> micros = PushToStartMicros(engine, samples, gap_us);
  Record(p50, column, state, Percentile(micros, 0.5));
  Record(p99, column, state, Percentile(micros, 0.99));
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

std::unique_ptr<engine::Engine> MakeEngine(const std::string& name, const EngineBenchOptions& o) {
  return engine::CreateEngine(EngineOptionsFor(name, o.pool_workers, o.cpu_workers));
}

// Every case but the idle CPU one, once, on a fresh engine `name`.
void RunEngineOnce(const std::string& name, RunState* state) {
  const EngineBenchOptions& o = state->options;
  std::unique_ptr<engine::Engine> engine = MakeEngine(name, o);
  (void)IndependentOpsPerSecond(*engine, std::min<int64_t>(o.ops, 10'000));  // warm up
  Record(kIndependent, name, state, IndependentOpsPerSecond(*engine, o.ops));
  Record(kChain, name, state, ChainOpsPerSecond(*engine, o.ops));
  std::vector<uint64_t> data;
  Record(kDag, name, state, DagOpsPerSecond(*engine, state->dag, &data));
  state->dag_ok = CheckDag(name, data, state->expected) && state->dag_ok;
  RecordLatency(kLatencyP50, kLatencyP99, o.latency_samples, 0, *engine, name, state);
  RecordLatency(kIdleLatencyP50, kIdleLatencyP99, o.idle_latency_samples, o.idle_gap_us, *engine,
                name, state);
}

// A fresh engine, alone in its process: whatever CPU the process uses
// while it idles is the engine's.
void RunIdleCpuOnce(const std::string& name, RunState* state) {
  std::unique_ptr<engine::Engine> engine = MakeEngine(name, state->options);
  Record(kIdleCpu, name, state, IdleCpuPercent(*engine, state->options.idle_cpu_ops));
}

void RunTbbOnce(RunState* state) {
  std::vector<uint64_t> data = state->dag.initial;
  const double seconds = RunOnTbbFlowGraph(state->dag, state->options.peer_threads, &data);
  Record(kDag, kTbb, state, static_cast<double>(state->dag.ops.size()) / seconds);
  state->dag_ok = CheckDag(kTbb, data, state->expected) && state->dag_ok;
}

// StarPU starts afresh each run (untimed): its idle workers poll, and would
// steal a core from the engines if it stayed up.
void RunStarPUOnce(RunState* state) {
  StarPUPeer starpu(state->options.peer_threads);
  std::vector<uint64_t> data = state->dag.initial;
  const double seconds = starpu.Run(state->dag, &data);
  Record(kDag, kStarPU, state, static_cast<double>(state->dag.ops.size()) / seconds);
  state->dag_ok = CheckDag(kStarPU, data, state->expected) && state->dag_ok;
  state->starpu_description = starpu.description();
}

// Runs `body` in a child process (--isolate) and merges the figures it
// records: the first line of the child's output is StarPU's description,
// the rest its Results.
void RunIsolated(RunState* state, const std::function<void(RunState*)>& body) {
  if (!state->options.isolate) return body(state);
  const ForkedResult child = RunForked([&](std::string* output) {
    RunState mine{state->options, state->dag, state->expected, state->run, Results(), true, ""};
    body(&mine);
    *output = absl::StrCat(mine.starpu_description, "\n", mine.results.Serialize());
    return mine.dag_ok ? 0 : 1;
  });
  if (child.exit_status > 1) {
    throw Error(absl::StrFormat("[ember-bench-engine] run %d failed (exit status %d)",
                                state->run + 1, child.exit_status));
  }
  state->dag_ok = state->dag_ok && child.exit_status == 0;
  const size_t newline = child.output.find('\n');
  if (newline == std::string::npos) return;
  if (newline > 0) state->starpu_description = child.output.substr(0, newline);
  state->results.Merge(absl::string_view(child.output).substr(newline + 1));
}

// Runs are round-robin over the engines and peers. Returns a note per peer:
// what ran, or why it did not.
std::vector<std::string> RunRounds(RunState* state) {
  const EngineBenchOptions& o = state->options;
  const bool tbb = o.run_tbb && TbbPeerBuilt();
  const bool starpu = o.run_starpu && StarPUPeerBuilt();
  std::vector<std::string> notes;
  if (tbb) {
    notes.push_back(absl::StrCat(kTbb, ": ", TbbPeerDescription(), ", ", o.peer_threads,
                                 " threads, lightweight nodes, graph build timed"));
  } else if (o.run_tbb) {
    notes.push_back("TBB flow graph peer: not built (oneTBB not found or peers disabled)");
  }
  if (o.run_starpu && !starpu) {
    notes.push_back("StarPU peer: not built (starpu-1.3 not found or peers disabled)");
  }
  for (state->run = 0; state->run < o.repeat; ++state->run) {
    for (const std::string& name : o.engines) {
      RunIsolated(state, [&name](RunState* run) { RunEngineOnce(name, run); });
      if (o.idle_cpu_ops > 0) {
        RunIsolated(state, [&name](RunState* run) { RunIdleCpuOnce(name, run); });
      }
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

}  // namespace

CpuCasesResult RunCpuCases(const EngineBenchOptions& options) {
  const MachineInfo machine = MachineInfo::Read();
  absl::FPrintF(stderr, "[ember-bench-engine] %s; making the random DAG (%d ops)\n", machine.Note(),
                options.dag.num_ops);
  const Workload dag = engine::testing::MakeRandomWorkload(options.dag);
  const auto serial_start = std::chrono::steady_clock::now();
  const std::vector<uint64_t> expected = engine::testing::RunSerial(dag);
  const double serial_ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - serial_start)
          .count() /
      static_cast<double>(dag.ops.size());

  RunState state{options, dag, expected, /*run=*/0, Results(), /*dag_ok=*/true, ""};
  const OtherProcessesMeter others;
  std::vector<std::string> notes = RunRounds(&state);
  notes.push_back(others.Note("ember-bench-engine"));
  // The op bodies' own cost, to set against the per-op cost of each column.
  notes.push_back(absl::StrFormat("op body alone (RunSerial, one thread): %.0f ns/op", serial_ns));
  notes.push_back(machine.Note());
  notes.push_back(
      absl::StrFormat("%s of %d runs%s; ThreadedEngine pool_workers=%d, PerDevice cpu_workers=%d",
                      options.best ? "best" : "median", options.repeat,
                      options.isolate ? ", each in its own process" : "", options.pool_workers,
                      options.cpu_workers));
  if (options.idle_cpu_ops > 0) {
    notes.push_back(
        "idle CPU: a fresh engine alone in its process, user+sys time (getrusage) over 1 s of "
        "sleep, 0.2 s after its ops finished");
  }
  if (!state.dag_ok) notes.push_back("ERROR: a random DAG result differed from RunSerial");

  CpuCasesResult result;
  result.table = MakeCpuTable(options, &state.results, std::move(notes));
  result.results = std::move(state.results);
  result.dag_ok = state.dag_ok;
  return result;
}

}  // namespace ember::bench
