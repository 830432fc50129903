#include "tools/bench/engine/bench_options.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/engine.h"
#include "tools/bench/common/json_writer.h"

namespace ember::bench {
namespace {

std::string JsonInts(const std::vector<int>& values) {
  std::vector<std::string> items;
  for (int value : values) items.push_back(absl::StrCat(value));
  return JsonArray(items);
}

std::string GpuOptionsJson(const GpuBenchOptions& gpu) {
  return JsonObject()
      .Add("engines", JsonStrings(gpu.engines))
      .Add("repeat", absl::StrCat(gpu.repeat))
      .Add("chain_ops", absl::StrCat(gpu.chain_ops))
      .Add("chain_us", JsonInts(gpu.chain_us))
      .Add("chain_prop", JsonString(engine::ToString(gpu.chain_prop)))
      .Add("dag_rounds", absl::StrCat(gpu.dag_rounds))
      .Add("fan_out", absl::StrCat(gpu.fan_out))
      .Add("dag_kernel_us", absl::StrCat(gpu.dag_kernel_us))
      .Add("independent_ops", absl::StrCat(gpu.independent_ops))
      .Add("independent_us", JsonInts(gpu.independent_us))
      .Add("gpu_workers", absl::StrCat(gpu.gpu_workers))
      .Add("event_pool_size", absl::StrCat(gpu.event_pool_size))
      .Render();
}

}  // namespace

engine::EngineOptions EngineOptionsFor(const std::string& name, int pool_workers, int cpu_workers) {
  engine::EngineOptions engine_options =
      engine::ParseEngineType(name, engine::EngineOptions::FromEnv());
  engine_options.pool_workers = pool_workers;
  engine_options.cpu_workers = cpu_workers;
  return engine_options;
}

std::string OptionsJson(const EngineBenchOptions& o) {
  std::vector<std::string> cases;
  if (o.cpu_cases) cases.push_back("cpu");
  if (o.cold_cases) cases.push_back("cold");
  if (o.gpu_cases) cases.push_back("gpu");
  std::vector<std::string> peers;
  if (o.run_tbb) peers.push_back("tbb");
  if (o.run_starpu) peers.push_back("starpu");
  std::vector<std::string> shapes;
  for (const ColdShape& shape : o.cold_shapes) {
    shapes.push_back(absl::StrFormat("{\"ops\": %d, \"vars\": %d}", shape.ops, shape.vars));
  }
  return JsonObject()
      .Add("cases", JsonStrings(cases))
      .Add("ops", absl::StrCat(o.ops))
      .Add("dag_ops", absl::StrCat(o.dag.num_ops))
      .Add("dag_vars", absl::StrCat(o.dag.num_vars))
      .Add("seed", absl::StrCat(o.dag.seed))
      .Add("latency_samples", absl::StrCat(o.latency_samples))
      .Add("idle_latency_samples", absl::StrCat(o.idle_latency_samples))
      .Add("idle_gap_us", absl::StrCat(o.idle_gap_us))
      .Add("idle_cpu_ops", absl::StrCat(o.idle_cpu_ops))
      .Add("engines", JsonStrings(o.engines))
      .Add("peers", JsonStrings(peers))
      .Add("pool_workers", absl::StrCat(o.pool_workers))
      .Add("cpu_workers", absl::StrCat(o.cpu_workers))
      .Add("peer_threads", absl::StrCat(o.peer_threads))
      .Add("repeat", absl::StrCat(o.repeat))
      .Add("stat", JsonString(o.best ? "best" : "median"))
      .Add("isolate", JsonBool(o.isolate))
      .Add("cold_engines", JsonStrings(o.cold_engines))
      .Add("cold_shapes", JsonArray(shapes))
      .Add("cold_repeat", absl::StrCat(o.cold_repeat))
      .Add("gpu", GpuOptionsJson(o.gpu))
      .Render(4);
}

}  // namespace ember::bench
