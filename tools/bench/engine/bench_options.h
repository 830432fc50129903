#pragma once

// What ember-bench-engine runs: the options its flags are parsed into
// (ember_bench_engine.cc), passed down to every case set.
//
// Thread safety: plain values.

#include <cstdint>
#include <string>
#include <vector>

#include "engine/engine_options.h"
#include "engine/testing/random_workload.h"
#include "tools/bench/engine/gpu_cases.h"

namespace ember::bench {

// The engine the targets apply to: the default engine.
inline constexpr char kTargetEngine[] = "ThreadedEnginePerDevice";

// The peers' columns.
inline constexpr char kTbb[] = "TBB flow graph";
inline constexpr char kStarPU[] = "StarPU";

// A random DAG of the cold case: `ops` ops over `vars` vars.
struct ColdShape {
  int ops = 0;
  int vars = 0;
};

struct EngineBenchOptions {
  // Which case sets run (--cases).
  bool cpu_cases = false;
  bool cold_cases = false;
  bool gpu_cases = false;

  // The warm CPU cases.
  int64_t ops = 0;
  engine::testing::WorkloadSpec dag;  // its seed is the cold DAG's too
  int latency_samples = 0;
  int idle_latency_samples = 0;
  int idle_gap_us = 0;
  int64_t idle_cpu_ops = 0;  // 0: no idle CPU case
  std::vector<std::string> engines;
  int repeat = 0;
  bool best = false;     // summarize repeats by the best one, not the median
  bool isolate = false;  // every run of an engine or peer in its own process

  // Shared by the CPU and cold cases.
  bool run_tbb = false;
  bool run_starpu = false;
  int pool_workers = 0;  // ThreadedEngine
  int cpu_workers = 0;   // ThreadedEnginePerDevice
  int peer_threads = 0;

  // The cold cases.
  std::vector<std::string> cold_engines;
  std::vector<ColdShape> cold_shapes;
  int cold_repeat = 0;

  GpuBenchOptions gpu;
  std::string json_path;
};

// The options of engine `name` (an ENGINE_TYPE name) in this bench: the
// type's defaults with --pool_workers and --cpu_workers. Throws
// InvalidArgument for an unknown name.
[[nodiscard]] engine::EngineOptions EngineOptionsFor(const std::string& name, int pool_workers,
                                                     int cpu_workers);

// The options as a JSON object, for the report.
[[nodiscard]] std::string OptionsJson(const EngineBenchOptions& options);

}  // namespace ember::bench
