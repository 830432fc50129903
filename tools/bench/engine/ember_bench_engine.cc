// ember-bench-engine: throughput, latency and idle cost of every engine
// type, side by side with a oneTBB flow graph and StarPU running the same
// random DAG; the same DAG cold, in a fresh process per run; and GPU cases
// beside the same kernels issued by hand. Three case sets (--cases):
//
//   cpu   warm: engines and peers round-robin, each run in a forked child
//         (cpu_cases.h, engine_cases.h).
//   cold  every run in a fresh process spawned from this binary
//         (cold_cases.h, cold_run.h).
//   gpu   GPU ops on engines against hand-written CUDA (gpu_cases.h);
//         skipped, with a note, without a GPU.
//
// The sets run in that order: the CPU cases fork, and a child forked after
// CUDA is initialized cannot use it. The tables print on stdout (progress
// on stderr), and --json=PATH writes them with every run's figures.
//
// Exit status: 0 when the cases ran (whatever the targets say), 1 when a
// result differed from its serial run (or a GPU counter from its kernels),
// 2 for an error.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "engine/engine.h"
#include "engine/error.h"
#include "tools/bench/common/json_writer.h"
#include "tools/bench/common/machine_notes.h"
#include "tools/bench/common/table_printer.h"
#include "tools/bench/engine/bench_options.h"
#include "tools/bench/engine/cold_cases.h"
#include "tools/bench/engine/cold_run.h"
#include "tools/bench/engine/cpu_cases.h"
#include "tools/bench/engine/gpu_cases.h"
#include "tools/train/tool_checks.h"

ABSL_FLAG(std::vector<std::string>, cases, std::vector<std::string>({"cpu", "cold", "gpu"}),
          "case sets to run: cpu (every engine and the peers, warm), cold (the random DAG in a "
          "fresh process per run), gpu (GPU ops beside hand-written CUDA; skipped without a GPU)");
ABSL_FLAG(int64_t, ops, 1'000'000, "ops per run of the independent and chain cases");
ABSL_FLAG(int, dag_ops, 100'000, "ops of the random DAG");
ABSL_FLAG(int, dag_vars, 100, "vars of the random DAG");
ABSL_FLAG(uint64_t, seed, 1, "seed of the random DAG (warm and cold)");
ABSL_FLAG(int, latency_samples, 20'000, "push-to-start samples per run, back to back");
ABSL_FLAG(int, idle_latency_samples, 1'000, "push-to-start samples per run after an idle gap");
ABSL_FLAG(int, idle_gap_us, 1'000, "the idle gap before each 'after idle' sample");
ABSL_FLAG(int64_t, idle_cpu_ops, 100'000,
          "no-op ops pushed before the idle CPU case measures (0: skip the case)");
ABSL_FLAG(std::vector<std::string>, engines,
          std::vector<std::string>({"NaiveEngine", "ThreadedEngine", "ThreadedEnginePerDevice"}),
          "engines of the cpu cases, by ENGINE_TYPE name");
ABSL_FLAG(std::vector<std::string>, peers, std::vector<std::string>({"tbb", "starpu"}),
          "peers to run on the random DAG (cpu and cold cases): tbb, starpu");
ABSL_FLAG(int, pool_workers, 2, "ThreadedEngine: workers of the shared pool");
ABSL_FLAG(int, cpu_workers, 1, "ThreadedEnginePerDevice: normal CPU workers");
ABSL_FLAG(int, peer_threads, 2, "threads of the TBB peer and CPU workers of the StarPU peer");
ABSL_FLAG(int, repeat, 5, "runs of every cpu case");
ABSL_FLAG(std::string, stat, "median", "how cpu repeats are summarized: median or best");
ABSL_FLAG(bool, isolate, true, "run every cpu run of an engine or peer in a child process");
ABSL_FLAG(std::vector<std::string>, cold_engines,
          std::vector<std::string>({"ThreadedEnginePerDevice"}),
          "engines of the cold cases, by ENGINE_TYPE name; each runs PushSync and PushAsync");
ABSL_FLAG(std::vector<std::string>, cold_shapes,
          std::vector<std::string>({"100000x100", "1000000x1000"}),
          "random DAGs of the cold cases, as OPSxVARS");
ABSL_FLAG(int, cold_repeat, 10, "rounds of every cold shape, each run a fresh process");
ABSL_FLAG(std::string, json, "", "also write every printed figure and every run's to this file");
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

constexpr char kWho[] = "ember-bench-engine";

[[noreturn]] void Bad(const std::string& what) {
  throw InvalidArgument(absl::StrCat("[", kWho, "] ", what));
}

// A list flag of whole numbers, e.g. --gpu_chain_us=0,10.
std::vector<int> IntsFromFlag(const char* flag, const std::vector<std::string>& values) {
  std::vector<int> ints;
  for (const std::string& value : values) {
    if (value.empty()) continue;  // --gpu_chain_us= runs no chain
    int n = 0;
    if (!absl::SimpleAtoi(value, &n) || n < 0) {
      Bad(absl::StrCat("--", flag, ": '", value, "' is not a whole number"));
    }
    ints.push_back(n);
  }
  return ints;
}

std::vector<ColdShape> ColdShapesFromFlag(const std::vector<std::string>& values) {
  std::vector<ColdShape> shapes;
  for (const std::string& value : values) {
    if (value.empty()) continue;
    const std::vector<std::string> parts = absl::StrSplit(value, 'x');
    ColdShape shape;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &shape.ops) ||
        !absl::SimpleAtoi(parts[1], &shape.vars) || shape.ops < 1 || shape.vars < 1) {
      Bad(absl::StrCat("--cold_shapes: '", value, "' is not OPSxVARS, e.g. 100000x100"));
    }
    shapes.push_back(shape);
  }
  return shapes;
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
    Bad(absl::StrCat("--gpu_chain_prop='", prop, "'; valid: copy_to_gpu, gpu_prioritized"));
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

EngineBenchOptions OptionsFromFlags() {
  EngineBenchOptions o;
  for (const std::string& name : absl::GetFlag(FLAGS_cases)) {
    if (name == "cpu") {
      o.cpu_cases = true;
    } else if (name == "cold") {
      o.cold_cases = true;
    } else if (name == "gpu") {
      o.gpu_cases = true;
    } else {
      Bad(absl::StrCat("unknown case set '", name, "'; valid: cpu, cold, gpu"));
    }
  }
  o.ops = absl::GetFlag(FLAGS_ops);
  o.dag.num_ops = absl::GetFlag(FLAGS_dag_ops);
  o.dag.num_vars = absl::GetFlag(FLAGS_dag_vars);
  o.dag.seed = absl::GetFlag(FLAGS_seed);
  o.latency_samples = absl::GetFlag(FLAGS_latency_samples);
  o.idle_latency_samples = absl::GetFlag(FLAGS_idle_latency_samples);
  o.idle_gap_us = absl::GetFlag(FLAGS_idle_gap_us);
  o.idle_cpu_ops = std::max<int64_t>(0, absl::GetFlag(FLAGS_idle_cpu_ops));
  o.engines = absl::GetFlag(FLAGS_engines);
  for (const std::string& name : o.engines) engine::ParseEngineType(name);  // throws if bad
  for (const std::string& peer : absl::GetFlag(FLAGS_peers)) {
    if (peer != "tbb" && peer != "starpu") {
      Bad(absl::StrCat("unknown peer '", peer, "'; valid: tbb, starpu"));
    }
    (peer == "tbb" ? o.run_tbb : o.run_starpu) = true;
  }
  o.pool_workers = absl::GetFlag(FLAGS_pool_workers);
  o.cpu_workers = absl::GetFlag(FLAGS_cpu_workers);
  o.peer_threads = absl::GetFlag(FLAGS_peer_threads);
  o.repeat = std::max(1, absl::GetFlag(FLAGS_repeat));
  const std::string stat = absl::GetFlag(FLAGS_stat);
  if (stat != "median" && stat != "best")
    Bad(absl::StrCat("--stat='", stat, "'; valid: median, best"));
  o.best = stat == "best";
  o.isolate = absl::GetFlag(FLAGS_isolate);
  o.cold_engines = absl::GetFlag(FLAGS_cold_engines);
  for (const std::string& name : o.cold_engines) engine::ParseEngineType(name);  // throws if bad
  o.cold_shapes = ColdShapesFromFlag(absl::GetFlag(FLAGS_cold_shapes));
  o.cold_repeat = std::max(1, absl::GetFlag(FLAGS_cold_repeat));
  o.gpu = GpuOptionsFromFlags();
  o.json_path = absl::GetFlag(FLAGS_json);
  return o;
}

int Main(const EngineBenchOptions& options) {
  const MachineInfo machine = MachineInfo::Read();
  std::vector<Table> tables;
  Results results;
  bool dag_ok = true;
  bool counts_ok = true;
  if (options.cpu_cases) {
    CpuCasesResult cpu = RunCpuCases(options);
    tables.push_back(std::move(cpu.table));
    results.Append(cpu.results);
    dag_ok = dag_ok && cpu.dag_ok;
  }
  if (options.cold_cases) {
    ColdCasesResult cold = RunColdCases(options);
    tables.push_back(std::move(cold.table));
    results.Append(cold.results);
    dag_ok = dag_ok && cold.dag_ok;
  }
  if (options.gpu_cases) {
    GpuCasesResult gpu = RunGpuCases(options.gpu);
    if (!gpu.table.rows.empty()) gpu.table.notes.push_back("host " + machine.Note());
    tables.push_back(std::move(gpu.table));
    results.Append(gpu.results);
    counts_ok = gpu.counts_ok;
  }
  PrintTables(tables);
  if (!options.json_path.empty()) {
    const std::string json = JsonObject()
                                 .Add("benchmark", JsonString(kWho))
                                 .Add("options", OptionsJson(options))
                                 .Add("machine", machine.Json())
                                 .Add("dag_results_match_serial", JsonBool(dag_ok))
                                 .Add("gpu_counters_match", JsonBool(counts_ok))
                                 .Add("tables", JsonArray(TablesJson(tables), 4))
                                 .Add("samples", ResultsJson(results))
                                 .Render(2) +
                             "\n";
    WriteJsonFile(options.json_path, json, kWho);
  }
  return dag_ok && counts_ok ? 0 : 1;
}

}  // namespace
}  // namespace ember::bench

int main(int argc, char** argv) {
  // A cold run's child (cold_run.h) parses its own arguments and nothing
  // else of the bench's.
  if (ember::bench::IsColdRun(argc, argv)) return ember::bench::ColdRunMain(argc, argv);
  absl::SetProgramUsageMessage(
      "Engine throughput, latency and idle cost, warm and cold, with oneTBB flow graph and "
      "StarPU peers on a random DAG, and GPU cases.\n"
      "Usage: ember-bench-engine [--cases=cpu,cold,gpu] [--ops=N] [--engines=A,B] [--repeat=R] "
      "[--cold_repeat=R] [--json=PATH]\n"
      "Exit status: 0 ran, 1 a result differed from its serial run, 2 error.");
  absl::ParseCommandLine(argc, argv);
  try {
    // Bad input fails here, at once, not after the cases ran (the GPU cases'
    // engines write into --gpu_profile_dir only when they go; the check
    // also makes the directory, which nothing else does).
    ember::tools::CheckEnvironment();
    ember::tools::CheckWritableFile("--json", absl::GetFlag(FLAGS_json));
    ember::tools::CheckWritableDir("--gpu_profile_dir", absl::GetFlag(FLAGS_gpu_profile_dir));
    return ember::bench::Main(ember::bench::OptionsFromFlags());
  } catch (const std::exception& e) {
    absl::FPrintF(stderr, "ember-bench-engine: %s\n", e.what());
    return 2;
  }
}
