// Micro-benchmarks of the engine's per-op cost (Google Benchmark). The
// side-by-side comparison with TBB and StarPU is ember-bench-engine; these
// isolate the push and completion paths, e.g. for callgrind:
//   valgrind --tool=callgrind build/bin/dependency_engine_benchmark --benchmark_filter=Naive

#include <benchmark/benchmark.h>

#include <vector>

#include "engine/engine.h"
#include "engine/testing/random_workload.h"

namespace ember::engine {
namespace {

std::unique_ptr<Engine> MakeEngine(EngineType type) {
  EngineOptions options;
  options.type = type;
  return CreateEngine(options);
}

void NoOp(RunContext, const OnStart& start, const OnComplete& done) {
  start();
  done();
}

void BM_IndependentNoOps(benchmark::State& state) {
  auto engine = MakeEngine(static_cast<EngineType>(state.range(0)));
  for (auto _ : state) engine->PushAsync(&NoOp, {}, {});
  engine->WaitForAll();
  state.SetItemsProcessed(state.iterations());
}

void BM_RandomDag(benchmark::State& state) {
  auto engine = MakeEngine(static_cast<EngineType>(state.range(0)));
  testing::WorkloadSpec spec;
  spec.num_ops = 100000;
  const testing::Workload workload = testing::MakeRandomWorkload(spec);
  std::vector<VarHandle> vars;
  for (int v = 0; v < workload.num_vars; ++v) vars.push_back(engine->NewVariable());
  std::vector<std::vector<VarHandle>> reads;
  for (const auto& op : workload.ops) {
    reads.emplace_back();
    for (int r : op.reads) reads.back().push_back(vars[r]);
  }
  size_t i = 0;
  for (auto _ : state) {
    const auto& op = workload.ops[i];
    engine->PushAsync(&NoOp, reads[i], {vars[op.write]});
    if (++i == workload.ops.size()) i = 0;
  }
  engine->WaitForAll();
  state.SetItemsProcessed(state.iterations());
}

BENCHMARK(BM_IndependentNoOps)
    ->ArgName("engine")
    ->Arg(static_cast<int>(EngineType::kNaive))
    ->Arg(static_cast<int>(EngineType::kThreadedPerDevice))
    ->UseRealTime();
BENCHMARK(BM_RandomDag)
    ->ArgName("engine")
    ->Arg(static_cast<int>(EngineType::kNaive))
    ->Arg(static_cast<int>(EngineType::kThreadedPerDevice))
    ->UseRealTime();

}  // namespace
}  // namespace ember::engine

BENCHMARK_MAIN();
