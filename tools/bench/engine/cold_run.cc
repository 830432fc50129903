#include "tools/bench/engine/cold_run.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "engine/engine.h"
#include "engine/error.h"
#include "engine/testing/random_workload.h"
#include "tools/bench/common/core_round_trip.h"
#include "tools/bench/engine/bench_options.h"
#include "tools/bench/engine/dag_push.h"
#include "tools/bench/engine/starpu_peer.h"
#include "tools/bench/engine/tbb_peer.h"

namespace ember::bench {
namespace {

using Clock = std::chrono::steady_clock;
using engine::testing::Workload;

constexpr std::pair<ColdRunner, const char*> kRunnerNames[] = {
    {ColdRunner::kEngineSync, "engine_sync"},
    {ColdRunner::kEngineAsync, "engine_async"},
    {ColdRunner::kTbb, "tbb"},
    {ColdRunner::kStarPU, "starpu"},
};

const char* RunnerName(ColdRunner runner) {
  for (const auto& [value, name] : kRunnerNames) {
    if (value == runner) return name;
  }
  return "?";
}

[[noreturn]] void BadArgument(const std::string& arg) {
  throw InvalidArgument(absl::StrCat("[ember-bench-engine] cold run: bad argument '", arg, "'"));
}

int ParseInt(const std::string& arg, const std::string& value) {
  int n = 0;
  if (!absl::SimpleAtoi(value, &n) || n < 0) BadArgument(arg);
  return n;
}

// The timed part of a run: `run` between two clock reads and two getrusage
// snapshots.
template <typename Run>
void TimeDag(const Workload& workload, ColdRunResult* result, Run&& run) {
  const ProcessUsage before = ProcessUsage::Now();
  const auto start = Clock::now();
  run();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  result->usage = ProcessUsage::Now() - before;
  result->ops_per_s = static_cast<double>(workload.ops.size()) / seconds;
}

void RunOnEngine(const ColdRunSpec& spec, const Workload& workload, std::vector<uint64_t>* data,
                 ColdRunResult* result) {
  const engine::EngineOptions options =
      EngineOptionsFor(spec.engine, spec.pool_workers, spec.cpu_workers);
  const auto create_start = Clock::now();
  std::unique_ptr<engine::Engine> engine = engine::CreateEngine(options);
  result->create_us =
      std::chrono::duration<double, std::micro>(Clock::now() - create_start).count();
  const std::vector<engine::VarHandle> vars = NewVars(*engine, workload.num_vars);
  const PushPath path = spec.runner == ColdRunner::kEngineSync ? PushPath::kSync : PushPath::kAsync;
  TimeDag(workload, result, [&] { PushDag(*engine, workload, vars, path, data); });
  DeleteVars(*engine, vars);
}

void RunOnTbb(const ColdRunSpec& spec, const Workload& workload, std::vector<uint64_t>* data,
              ColdRunResult* result) {
  TimeDag(workload, result, [&] { (void)RunOnTbbFlowGraph(workload, spec.peer_threads, data); });
  result->description = absl::StrCat(TbbPeerDescription(), ", ", spec.peer_threads,
                                     " threads, lightweight nodes, graph build timed");
}

// Registering StarPU's handles (inside Run, untimed by Run itself) falls in
// the timed part here; for 100 or 1,000 vars it is small beside the DAG.
void RunOnStarPU(const ColdRunSpec& spec, const Workload& workload, std::vector<uint64_t>* data,
                 ColdRunResult* result) {
  StarPUPeer starpu(spec.peer_threads);
  TimeDag(workload, result, [&] { (void)starpu.Run(workload, data); });
  result->description = starpu.description();
}

}  // namespace

std::string ColdRunSpec::column() const {
  switch (runner) {
    case ColdRunner::kEngineSync:
      return absl::StrCat(engine, " ", PushPathName(PushPath::kSync));
    case ColdRunner::kEngineAsync:
      return absl::StrCat(engine, " ", PushPathName(PushPath::kAsync));
    case ColdRunner::kTbb:
      return kTbb;
    case ColdRunner::kStarPU:
      return kStarPU;
  }
  return "?";
}

std::vector<std::string> ColdRunSpec::ToArgs() const {
  return {absl::StrCat("runner=", RunnerName(runner)),
          absl::StrCat("engine=", engine),
          absl::StrCat("ops=", ops),
          absl::StrCat("vars=", vars),
          absl::StrCat("seed=", seed),
          absl::StrCat("pool_workers=", pool_workers),
          absl::StrCat("cpu_workers=", cpu_workers),
          absl::StrCat("peer_threads=", peer_threads)};
}

ColdRunSpec ColdRunSpec::FromArgs(const std::vector<std::string>& args) {
  ColdRunSpec spec;
  for (const std::string& arg : args) {
    const std::pair<std::string, std::string> kv = absl::StrSplit(arg, absl::MaxSplits('=', 1));
    const auto& [key, value] = kv;
    if (key == "runner") {
      bool known = false;
      for (const auto& [runner, name] : kRunnerNames) {
        if (value == name) {
          spec.runner = runner;
          known = true;
        }
      }
      if (!known) BadArgument(arg);
    } else if (key == "engine") {
      spec.engine = value;
    } else if (key == "ops") {
      spec.ops = ParseInt(arg, value);
    } else if (key == "vars") {
      spec.vars = ParseInt(arg, value);
    } else if (key == "seed") {
      if (!absl::SimpleAtoi(value, &spec.seed)) BadArgument(arg);
    } else if (key == "pool_workers") {
      spec.pool_workers = ParseInt(arg, value);
    } else if (key == "cpu_workers") {
      spec.cpu_workers = ParseInt(arg, value);
    } else if (key == "peer_threads") {
      spec.peer_threads = ParseInt(arg, value);
    } else {
      BadArgument(arg);
    }
  }
  return spec;
}

std::string ColdRunResult::Serialize() const {
  return absl::StrFormat(
      "ops_per_s\t%.17g\ncreate_us\t%.17g\nuser_s\t%.17g\nsys_s\t%.17g\nvoluntary\t%.17g\n"
      "involuntary\t%.17g\nround_trip_ns\t%.17g\ndescription\t%s\n",
      ops_per_s, create_us, usage.user_s, usage.sys_s, usage.voluntary_switches,
      usage.involuntary_switches, round_trip_ns, description);
}

ColdRunResult ColdRunResult::Parse(std::string_view text) {
  std::map<std::string, std::string> fields;
  for (absl::string_view line :
       absl::StrSplit(absl::string_view(text.data(), text.size()), '\n', absl::SkipEmpty())) {
    const std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits('\t', 1));
    fields.insert(kv);
  }
  ColdRunResult result;
  auto number = [&](const char* key, double* out) {
    auto it = fields.find(key);
    return it != fields.end() && absl::SimpleAtod(it->second, out);
  };
  if (!number("ops_per_s", &result.ops_per_s)) {
    throw Error(absl::StrCat("[ember-bench-engine] a cold run printed no result: '",
                             std::string(text), "'"));
  }
  (void)number("create_us", &result.create_us);
  (void)number("user_s", &result.usage.user_s);
  (void)number("sys_s", &result.usage.sys_s);
  (void)number("voluntary", &result.usage.voluntary_switches);
  (void)number("involuntary", &result.usage.involuntary_switches);
  (void)number("round_trip_ns", &result.round_trip_ns);
  result.description = fields["description"];
  return result;
}

bool IsColdRun(int argc, char** argv) {
  return argc >= 2 && std::strcmp(argv[1], kColdRunFlag) == 0;
}

int ColdRunMain(int argc, char** argv) {
  try {
    const ColdRunSpec spec = ColdRunSpec::FromArgs(std::vector<std::string>(argv + 2, argv + argc));
    engine::testing::WorkloadSpec workload_spec;
    workload_spec.num_ops = spec.ops;
    workload_spec.num_vars = spec.vars;
    workload_spec.seed = spec.seed;
    const Workload workload = engine::testing::MakeRandomWorkload(workload_spec);
    std::vector<uint64_t> data = workload.initial;
    ColdRunResult result;
    // Probed while no engine or peer has threads (StarPU's spin), so that
    // the probe's two threads have the two cores to themselves.
    const double round_trip_before = CoreRoundTripNs();
    switch (spec.runner) {
      case ColdRunner::kEngineSync:
      case ColdRunner::kEngineAsync:
        RunOnEngine(spec, workload, &data, &result);
        break;
      case ColdRunner::kTbb:
        RunOnTbb(spec, workload, &data, &result);
        break;
      case ColdRunner::kStarPU:
        RunOnStarPU(spec, workload, &data, &result);
        break;
    }
    result.round_trip_ns = (round_trip_before + CoreRoundTripNs()) / 2;
    const bool match = data == engine::testing::RunSerial(workload);
    if (!match) {
      absl::FPrintF(stderr, "[ember-bench-engine] ERROR: cold %s: result differs from RunSerial\n",
                    spec.column());
    }
    absl::PrintF("%s", result.Serialize());
    std::fflush(stdout);
    return match ? 0 : 1;
  } catch (const std::exception& e) {
    absl::FPrintF(stderr, "[ember-bench-engine] ERROR in a cold run: %s\n", e.what());
    return 2;
  }
}

}  // namespace ember::bench
