// Long runs (ctest label "stress"): a 1,000,000-op random workload with
// random priorities and properties pushed by several threads, and pushing
// 10,000,000 ops without any wait in flat resident memory.

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include <gtest/gtest.h>

#include "engine/testing/random_workload.h"
#include "tests/engine/engine_cases.h"

namespace ember::engine::testing {
namespace {

class StressTest : public ::testing::TestWithParam<EngineCase> {};

TEST_P(StressTest, MillionOpsFromFourThreadsMatchSerialRun) {
  WorkloadSpec spec;
  spec.num_ops = 1000000;
  spec.num_vars = 128;
  spec.num_const_vars = 16;
  spec.num_partitions = 4;
  spec.sleep_probability = 0.0005;
  spec.max_sleep_us = 20;
  spec.random_properties = true;
  spec.random_priorities = true;
  spec.seed = 2026;
  const Workload workload = MakeRandomWorkload(spec);
  RunOptions options;
  options.push_threads = 4;
  options.mix_push_kinds = true;
  options.foreign_completion = true;
  auto engine = CreateEngine(OptionsFor(GetParam()));
  EXPECT_EQ(RunOnEngine(*engine, workload, options), RunSerial(workload));
}

int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

// The bound keeps at most max_in_flight blocks alive; a small bound makes the
// window fill within the first million pushes, so that any growth after it
// is a leak, not the window filling up.
TEST_P(StressTest, TenMillionPushesWithoutWaitKeepMemoryFlat) {
  EngineOptions options = OptionsFor(GetParam());
  options.max_in_flight = 4096;
  auto engine = CreateEngine(options);
  VarHandle vars[4] = {engine->NewVariable(), engine->NewVariable(), engine->NewVariable(),
                       engine->NewVariable()};
  constexpr int64_t kOps = 10'000'000;
  int64_t after_first_million = 0;
  for (int64_t i = 0; i < kOps; ++i) {
    engine->PushAsync([](RunContext, const OnStart&, const OnComplete& done) { done(); },
                      {vars[i % 4]}, {vars[(i + 1) % 4]});
    if (i == 1'000'000) after_first_million = ResidentBytes();
  }
  const int64_t at_end = ResidentBytes();
  engine->WaitForAll();
  std::printf("resident after 1M pushes: %.1f MiB, after 10M: %.1f MiB\n",
              after_first_million / 1048576.0, at_end / 1048576.0);
  EXPECT_LT(at_end - after_first_million, int64_t{16} << 20) << "memory grew with pushed ops";
}

INSTANTIATE_TEST_SUITE_P(AllEngines, StressTest,
                         ::testing::Values(EngineCase{EngineType::kNaive, 1},
                                           EngineCase{EngineType::kThreaded, 2},
                                           EngineCase{EngineType::kThreadedPerDevice, 2}),
                         CaseName);

}  // namespace
}  // namespace ember::engine::testing
