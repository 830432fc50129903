// ember-bench-engine: throughput and latency of every engine type, side by
// side with a oneTBB flow graph and StarPU running the same random DAG.
//
// Cases, each run --repeat times; the table shows the median of the repeats
// (--stat=best: the best one):
//   independent  --ops no-op ops with no vars: the cost of one push, dispatch
//                and completion, with nothing to order.
//   chain        --ops no-op ops that all write one var: every op waits for
//                the one before, so this is the dependency hand-off alone.
//   random DAG   MakeRandomWorkload(--dag_ops ops over --dag_vars vars, 2-19
//                reads each, no sleeps); each op computes ApplyOp, a few
//                nanoseconds, and every run's final data is checked against
//                RunSerial. The peers run the same ops.
//   latency      one op pushed on an idle engine at a time; the time from
//                before the push to the start of the op's function. The
//                pusher spins on a flag the op sets, so the engine is never
//                drained with WaitForAll between samples. "after idle" sleeps
//                --idle_gap_us between samples, so that workers go to sleep.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/engine.h"
#include "engine/error.h"
#include "engine/testing/random_workload.h"
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
ABSL_FLAG(int, repeat, 3, "runs of every case");
ABSL_FLAG(std::string, stat, "median", "how repeats are summarized: median or best");
ABSL_FLAG(std::string, json, "", "also write every printed figure to this JSON file");

namespace ember::bench {
namespace {

using Clock = std::chrono::steady_clock;
using engine::testing::Workload;

constexpr char kTbb[] = "TBB flow graph";
constexpr char kStarPU[] = "StarPU";
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
  bool best = false;  // summarize repeats by the best one, not the median
  std::string json_path;
};

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
    while (!started.load(std::memory_order_acquire)) {
    }
    micros[i] = std::chrono::duration<double, std::micro>(start_time - push_time).count();
  }
  engine.WaitForAll();  // the last op may still be completing
  return micros;
}

double Percentile(std::vector<double> values, double fraction) {
  if (values.empty()) return NAN;
  const auto rank = static_cast<size_t>(fraction * static_cast<double>(values.size() - 1) + 0.5);
  std::nth_element(values.begin(), values.begin() + rank, values.end());
  return values[rank];
}

// ---------------------------------------------------------------------------
// Results: every repeat's figure, by case and column, summarized into a table.

struct CaseSpec {
  const char* key;
  const char* unit;
  bool higher_is_better;
};

constexpr CaseSpec kIndependent = {"independent", "ops/s", true};
constexpr CaseSpec kChain = {"chain", "ops/s", true};
constexpr CaseSpec kDag = {"random_dag", "ops/s", true};
constexpr CaseSpec kDagVsTbb = {"random_dag_vs_tbb", "x", true};
constexpr CaseSpec kDagVsStarPU = {"random_dag_vs_starpu", "x", true};
constexpr CaseSpec kLatencyP50 = {"latency_p50", "us", false};
constexpr CaseSpec kLatencyP99 = {"latency_p99", "us", false};
constexpr CaseSpec kIdleLatencyP50 = {"idle_latency_p50", "us", false};
constexpr CaseSpec kIdleLatencyP99 = {"idle_latency_p99", "us", false};

class Results {
 public:
  void Add(const CaseSpec& c, const std::string& column, double value) {
    samples_[{c.key, column}].push_back(value);
  }

  // The summary of a case's repeats, or nothing if it was not run.
  std::optional<double> Get(const CaseSpec& c, const std::string& column, bool best) const {
    auto it = samples_.find({c.key, column});
    if (it == samples_.end()) return std::nullopt;
    std::vector<double> values = it->second;
    if (!best) return Percentile(values, 0.5);
    return c.higher_is_better ? *std::max_element(values.begin(), values.end())
                              : *std::min_element(values.begin(), values.end());
  }

 private:
  std::map<std::pair<std::string, std::string>, std::vector<double>> samples_;
};

// Runs `measure` options.repeat times, recording each figure under `c`.
template <typename Measure>
void Repeat(const BenchOptions& options, const CaseSpec& c, const std::string& column,
            Results* results, Measure measure) {
  for (int run = 0; run < options.repeat; ++run) {
    const double value = measure();
    results->Add(c, column, value);
    absl::FPrintF(stderr, "[ember-bench-engine] %-24s %-21s run %d/%d: %.6g %s\n", column, c.key,
                  run + 1, options.repeat, value, c.unit);
  }
}

// Like Repeat, for a latency case: every run yields a p50 and a p99.
void RepeatLatency(const BenchOptions& options, const CaseSpec& p50, const CaseSpec& p99,
                   int samples, int gap_us, engine::Engine& engine, const std::string& column,
                   Results* results) {
  if (samples <= 0) return;
  std::vector<double> micros;
  Repeat(options, p50, column, results, [&] {
    micros = PushToStartMicros(engine, samples, gap_us);
    results->Add(p99, column, Percentile(micros, 0.99));
    return Percentile(micros, 0.5);
  });
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

// Runs every case on engine `name`; false if a DAG result was wrong.
bool RunEngine(const BenchOptions& options, const std::string& name, const Workload& dag,
               const std::vector<uint64_t>& expected, Results* results) {
  std::unique_ptr<engine::Engine> engine = engine::CreateEngine(EngineOptionsFor(name, options));
  IndependentOpsPerSecond(*engine, std::min<int64_t>(options.ops, 10'000));  // warm up
  Repeat(options, kIndependent, name, results,
         [&] { return IndependentOpsPerSecond(*engine, options.ops); });
  Repeat(options, kChain, name, results, [&] { return ChainOpsPerSecond(*engine, options.ops); });
  bool ok = true;
  std::vector<uint64_t> data;
  Repeat(options, kDag, name, results, [&] {
    const double rate = DagOpsPerSecond(*engine, dag, &data);
    ok = CheckDag(name, data, expected) && ok;
    return rate;
  });
  RepeatLatency(options, kLatencyP50, kLatencyP99, options.latency_samples, 0, *engine, name,
                results);
  RepeatLatency(options, kIdleLatencyP50, kIdleLatencyP99, options.idle_latency_samples,
                options.idle_gap_us, *engine, name, results);
  return ok;
}

// Runs the DAG on the peers asked for. Adds a line to `notes` per peer (what
// ran, or why it did not); false if a DAG result was wrong.
bool RunPeers(const BenchOptions& options, const Workload& dag,
              const std::vector<uint64_t>& expected, Results* results,
              std::vector<std::string>* notes) {
  bool ok = true;
  std::vector<uint64_t> data;
  if (options.run_tbb && !TbbPeerBuilt()) {
    notes->push_back("TBB flow graph peer: not built (oneTBB not found or peers disabled)");
  } else if (options.run_tbb) {
    notes->push_back(absl::StrCat(kTbb, ": ", TbbPeerDescription(), ", ", options.peer_threads,
                                  " threads, graph build timed"));
    Repeat(options, kDag, kTbb, results, [&] {
      data = dag.initial;
      const double seconds = RunOnTbbFlowGraph(dag, options.peer_threads, &data);
      ok = CheckDag(kTbb, data, expected) && ok;
      return static_cast<double>(dag.ops.size()) / seconds;
    });
  }
  if (options.run_starpu && !StarPUPeerBuilt()) {
    notes->push_back("StarPU peer: not built (starpu-1.3 not found or peers disabled)");
  } else if (options.run_starpu) {
    StarPUPeer starpu(options.peer_threads);
    notes->push_back(
        absl::StrCat(kStarPU, ": ", starpu.description(), ", implicit data dependencies"));
    Repeat(options, kDag, kStarPU, results, [&] {
      data = dag.initial;
      const double seconds = starpu.Run(dag, &data);
      ok = CheckDag(kStarPU, data, expected) && ok;
      return static_cast<double>(dag.ops.size()) / seconds;
    });
  }
  return ok;
}

// ---------------------------------------------------------------------------
// The table: one row per case, one column per engine and peer.

struct TableRow {
  const CaseSpec* spec;
  std::string label;
  std::map<std::string, double> values;  // by column; absent: not run
};

struct Table {
  std::vector<std::string> columns;
  std::vector<TableRow> rows;
  std::vector<std::string> notes;

  [[nodiscard]] std::optional<double> Get(const CaseSpec& c, const std::string& column) const {
    for (const TableRow& row : rows) {
      if (row.spec != &c) continue;
      auto it = row.values.find(column);
      if (it != row.values.end()) return it->second;
    }
    return std::nullopt;
  }
};

std::string WithCommas(double value) {
  std::string digits = absl::StrFormat("%.0f", value);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0 && std::isdigit(digits[i - 1]); i -= 3) {
    digits.insert(i, ",");
  }
  return digits;
}

std::string FormatValue(const CaseSpec& c, double value) {
  if (std::string_view(c.unit) == "ops/s") return WithCommas(value);
  if (std::string_view(c.unit) == "x") return absl::StrFormat("%.2fx", value);
  return absl::StrFormat("%.2f", value);
}

void AddRow(const Results& results, bool best, const CaseSpec& c, std::string label, Table* table) {
  TableRow row{&c, std::move(label), {}};
  for (const std::string& column : table->columns) {
    if (auto value = results.Get(c, column, best)) row.values[column] = *value;
  }
  if (!row.values.empty()) table->rows.push_back(std::move(row));
}

// engine / peer on the random DAG, for every engine column.
void AddRatioRow(const BenchOptions& options, const CaseSpec& c, const char* peer,
                 std::string label, Table* table) {
  const std::optional<double> peer_rate = table->Get(kDag, peer);
  if (!peer_rate) return;
  TableRow row{&c, std::move(label), {}};
  for (const std::string& engine : options.engines) {
    if (auto rate = table->Get(kDag, engine)) row.values[engine] = *rate / *peer_rate;
  }
  table->rows.push_back(std::move(row));
}

Table MakeTable(const BenchOptions& options, const Results& results) {
  Table table;
  table.columns = options.engines;
  table.columns.push_back(kTbb);
  table.columns.push_back(kStarPU);
  const bool best = options.best;
  const std::string n = WithCommas(static_cast<double>(options.ops));
  AddRow(results, best, kIndependent, absl::StrCat("independent no-op ops, N=", n), &table);
  AddRow(results, best, kChain, absl::StrCat("one-var chain, N=", n), &table);
  AddRow(results, best, kDag,
         absl::StrCat("random DAG, ", WithCommas(options.dag.num_ops), " ops/",
                      options.dag.num_vars, " vars"),
         &table);
  AddRatioRow(options, kDagVsTbb, kTbb, "  engine / TBB flow graph", &table);
  AddRatioRow(options, kDagVsStarPU, kStarPU, "  engine / StarPU", &table);
  AddRow(results, best, kLatencyP50, "push-to-start p50, back to back", &table);
  AddRow(results, best, kLatencyP99, "push-to-start p99, back to back", &table);
  const std::string idle = absl::StrCat("after ", options.idle_gap_us, " us idle");
  AddRow(results, best, kIdleLatencyP50, absl::StrCat("push-to-start p50, ", idle), &table);
  AddRow(results, best, kIdleLatencyP99, absl::StrCat("push-to-start p99, ", idle), &table);
  std::erase_if(table.columns, [&](const std::string& column) {
    return std::none_of(table.rows.begin(), table.rows.end(),
                        [&](const TableRow& row) { return row.values.contains(column); });
  });
  return table;
}

// Short column headers keep the table within 100 characters.
std::string ShortName(const std::string& column) {
  for (const auto& [prefix, short_name] :
       {std::pair{"ThreadedEnginePerDevice", "PerDevice"}, std::pair{"ThreadedEngine", "Threaded"},
        std::pair{"NaiveEngine", "Naive"}, std::pair{"TBB flow graph", "TBB flow"}}) {
    if (column.rfind(prefix, 0) == 0) return short_name + column.substr(strlen(prefix));
  }
  return column;
}

void PrintTable(const Table& table) {
  std::string header = absl::StrFormat("%-40s %-6s", "case", "unit");
  for (const std::string& column : table.columns) {
    absl::StrAppend(&header, absl::StrFormat(" %12s", ShortName(column)));
  }
  absl::PrintF("%s\n%s\n", header, std::string(header.size(), '-'));
  for (const TableRow& row : table.rows) {
    std::string line = absl::StrFormat("%-40s %-6s", row.label, row.spec->unit);
    for (const std::string& column : table.columns) {
      auto it = row.values.find(column);
      const std::string cell = it == row.values.end() ? "-" : FormatValue(*row.spec, it->second);
      absl::StrAppend(&line, absl::StrFormat(" %12s", cell));
    }
    absl::PrintF("%s\n", line);
  }
  for (const std::string& note : table.notes) absl::PrintF("%s\n", note);
}

// ---------------------------------------------------------------------------
// Targets: what the default engine must reach on a 2-core machine.

struct Target {
  const char* name;
  const CaseSpec* spec;
  double goal;
  bool at_least;  // goal is a floor; else a ceiling
};

constexpr Target kTargets[] = {
    {"independent no-op ops", &kIndependent, 1e6, true},
    {"random DAG, engine / TBB flow graph", &kDagVsTbb, 2, true},
    {"random DAG, engine / StarPU", &kDagVsStarPU, 10, true},
    {"push-to-start p50, back to back", &kLatencyP50, 10, false},
};

struct TargetResult {
  const Target* target;
  std::optional<double> measured;
  [[nodiscard]] bool pass() const {
    return measured && (target->at_least ? *measured >= target->goal : *measured <= target->goal);
  }
};

std::vector<TargetResult> CheckTargets(const Table& table) {
  std::vector<TargetResult> checks;
  for (const Target& target : kTargets) {
    checks.push_back({&target, table.Get(*target.spec, kTargetEngine)});
  }
  return checks;
}

std::string WithUnit(const CaseSpec& c, double value) {
  const std::string text = FormatValue(c, value);
  return std::string_view(c.unit) == "x" ? text : absl::StrCat(text, " ", c.unit);
}

void PrintTargets(const std::vector<TargetResult>& checks) {
  absl::PrintF("\nTargets for %s (2-core machine):\n", kTargetEngine);
  for (const TargetResult& check : checks) {
    const Target& target = *check.target;
    const std::string measured = check.measured ? WithUnit(*target.spec, *check.measured) : "-";
    absl::PrintF("  %-40s %18s   %s %-18s %s\n", target.name, measured,
                 target.at_least ? ">=" : "<=", WithUnit(*target.spec, target.goal),
                 !check.measured ? "not run"
                 : check.pass()  ? "PASS"
                                 : "FAIL");
  }
}

// ---------------------------------------------------------------------------
// JSON: the same figures, by hand; every string here is plain ASCII.

std::string JsonString(std::string_view text) {
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') quoted.push_back('\\');
    quoted.push_back(c);
  }
  return quoted + "\"";
}

std::string JsonNumber(double value) {
  return std::isfinite(value) ? absl::StrFormat("%.10g", value) : "null";
}

std::string JsonOptions(const BenchOptions& options) {
  std::vector<std::string> engines;
  for (const std::string& name : options.engines) engines.push_back(JsonString(name));
  return absl::StrFormat(
      "{\"ops\": %d, \"dag_ops\": %d, \"dag_vars\": %d, \"seed\": %d, \"latency_samples\": %d, "
      "\"idle_latency_samples\": %d, \"idle_gap_us\": %d, \"engines\": [%s], \"pool_workers\": "
      "%d, \"cpu_workers\": %d, \"peer_threads\": %d, \"repeat\": %d, \"stat\": %s}",
      options.ops, options.dag.num_ops, options.dag.num_vars, options.dag.seed,
      options.latency_samples, options.idle_latency_samples, options.idle_gap_us,
      absl::StrJoin(engines, ", "), options.pool_workers, options.cpu_workers, options.peer_threads,
      options.repeat, JsonString(options.best ? "best" : "median"));
}

std::string JsonRows(const Table& table) {
  std::vector<std::string> rows;
  for (const TableRow& row : table.rows) {
    std::vector<std::string> values;
    for (const auto& [column, value] : row.values) {
      values.push_back(absl::StrCat(JsonString(column), ": ", JsonNumber(value)));
    }
    rows.push_back(
        absl::StrFormat("    {\"case\": %s, \"label\": %s, \"unit\": %s, \"values\": {%s}}",
                        JsonString(row.spec->key), JsonString(row.label),
                        JsonString(row.spec->unit), absl::StrJoin(values, ", ")));
  }
  return absl::StrJoin(rows, ",\n");
}

std::string JsonTargets(const std::vector<TargetResult>& checks) {
  std::vector<std::string> targets;
  for (const TargetResult& check : checks) {
    targets.push_back(absl::StrFormat(
        "    {\"name\": %s, \"engine\": %s, \"unit\": %s, \"goal\": %s, \"at_least\": %s, "
        "\"measured\": %s, \"pass\": %s}",
        JsonString(check.target->name), JsonString(kTargetEngine),
        JsonString(check.target->spec->unit), JsonNumber(check.target->goal),
        check.target->at_least ? "true" : "false",
        check.measured ? JsonNumber(*check.measured) : "null", check.pass() ? "true" : "false"));
  }
  return absl::StrJoin(targets, ",\n");
}

void WriteJson(const std::string& path, const BenchOptions& options, const Table& table,
               const std::vector<TargetResult>& checks, bool dag_ok) {
  std::vector<std::string> notes;
  for (const std::string& note : table.notes) notes.push_back(JsonString(note));
  const std::string json = absl::StrFormat(
      "{\n  \"benchmark\": \"ember-bench-engine\",\n  \"options\": %s,\n  \"hardware_threads\": "
      "%d,\n  \"notes\": [%s],\n  \"dag_results_match_serial\": %s,\n  \"rows\": [\n%s\n  ],\n"
      "  \"targets\": [\n%s\n  ]\n}\n",
      JsonOptions(options), std::thread::hardware_concurrency(), absl::StrJoin(notes, ", "),
      dag_ok ? "true" : "false", JsonRows(table), JsonTargets(checks));
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr || std::fputs(json.c_str(), file) < 0 || std::fclose(file) != 0) {
    throw InvalidArgument(absl::StrCat("[ember-bench-engine] cannot write --json=", path));
  }
}

// ---------------------------------------------------------------------------

int Main(const BenchOptions& options) {
  absl::FPrintF(stderr, "[ember-bench-engine] making the random DAG (%d ops)\n",
                options.dag.num_ops);
  const Workload dag = engine::testing::MakeRandomWorkload(options.dag);
  const auto serial_start = Clock::now();
  const std::vector<uint64_t> expected = engine::testing::RunSerial(dag);
  const double serial_ns = 1e9 * SecondsSince(serial_start) / static_cast<double>(dag.ops.size());
  Results results;
  bool ok = true;
  for (const std::string& name : options.engines) {
    ok = RunEngine(options, name, dag, expected, &results) && ok;
  }
  std::vector<std::string> notes;
  ok = RunPeers(options, dag, expected, &results, &notes) && ok;

  Table table = MakeTable(options, results);
  table.notes = std::move(notes);
  // The op bodies' own cost, to set against the per-op cost of each column.
  table.notes.push_back(
      absl::StrFormat("op body alone (RunSerial, one thread): %.0f ns/op", serial_ns));
  table.notes.push_back(absl::StrFormat(
      "%d hardware threads; %s of %d runs; ThreadedEngine pool_workers=%d, PerDevice "
      "cpu_workers=%d",
      std::thread::hardware_concurrency(), options.best ? "best" : "median", options.repeat,
      options.pool_workers, options.cpu_workers));
  if (!ok) table.notes.push_back("ERROR: a random DAG result differed from RunSerial");
  PrintTable(table);
  const std::vector<TargetResult> checks = CheckTargets(table);
  PrintTargets(checks);
  if (!options.json_path.empty()) WriteJson(options.json_path, options, table, checks, ok);
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace ember::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Engine throughput and latency, with oneTBB flow graph and StarPU peers on a random DAG.\n"
      "Usage: ember-bench-engine [--ops=N] [--engines=A,B] [--repeat=R] [--json=PATH]");
  absl::ParseCommandLine(argc, argv);
  try {
    return ember::bench::Main(ember::bench::OptionsFromFlags());
  } catch (const std::exception& e) {
    absl::FPrintF(stderr, "ember-bench-engine: %s\n", e.what());
    return 2;
  }
}
