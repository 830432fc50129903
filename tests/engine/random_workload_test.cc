// The MXNet-style random workload: 10,000 ops over 100 vars, each reading 2
// to 19 vars and writing one, with random short sleeps, on every engine type
// and worker count; the final data must equal the serial run exactly.

#include "engine/testing/random_workload.h"

#include <gtest/gtest.h>

#include "tests/engine/engine_cases.h"

namespace ember::engine::testing {
namespace {

WorkloadSpec Spec(uint64_t seed) {
  WorkloadSpec spec;
  spec.num_ops = 10000;
  spec.num_vars = 100;
  spec.min_reads = 2;
  spec.max_reads = 19;
  spec.sleep_probability = 0.02;
  spec.max_sleep_us = 50;
  spec.seed = seed;
  return spec;
}

using RandomWorkloadTest = EngineTest;

TEST_P(RandomWorkloadTest, MatchesSerialRun) {
  const Workload workload = MakeRandomWorkload(Spec(7));
  EXPECT_EQ(RunOnEngine(engine(), workload), RunSerial(workload));
}

TEST_P(RandomWorkloadTest, MatchesSerialRunWithMixedPushKindsAndForeignCompletion) {
  WorkloadSpec spec = Spec(11);
  spec.random_properties = true;
  spec.random_priorities = true;
  const Workload workload = MakeRandomWorkload(spec);
  RunOptions options;
  options.mix_push_kinds = true;
  options.foreign_completion = true;
  EXPECT_EQ(RunOnEngine(engine(), workload, options), RunSerial(workload));
}

TEST_P(RandomWorkloadTest, MatchesSerialRunWithSeveralPushingThreads) {
  WorkloadSpec spec = Spec(13);
  spec.num_partitions = 4;
  spec.num_const_vars = 8;
  spec.random_properties = true;
  const Workload workload = MakeRandomWorkload(spec);
  RunOptions options;
  options.push_threads = 4;
  options.mix_push_kinds = true;
  EXPECT_EQ(RunOnEngine(engine(), workload, options), RunSerial(workload));
}

// The check itself must be able to fail: a reordered op changes the result.
TEST(RandomWorkload, SerialResultDependsOnOrder) {
  Workload workload = MakeRandomWorkload(Spec(3));
  workload.ops[11].reads[0] = workload.ops[10].write;  // op 11 reads what op 10 writes
  const auto in_order = RunSerial(workload);
  std::swap(workload.ops[10], workload.ops[11]);
  EXPECT_NE(RunSerial(workload), in_order);
}

INSTANTIATE_TEST_SUITE_P(AllEngines, RandomWorkloadTest, ::testing::ValuesIn(AllEngineCases()),
                         CaseName);

}  // namespace
}  // namespace ember::engine::testing
