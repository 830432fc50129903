// Sharded training on GPUs over NCCL (TrainSharded with gpus: rank r on
// GPU r, one process) against one GPU's Trainer over the same global
// batches with its dense gradients in rank-sized slices: with world size
// 1 on one GPU, and with 2 ranks on two GPUs (skipped with fewer), under
// every sharded schedule (and every optimizer under sparse-dist), with an
// embedding cache on each rank. Table-wise shards move every value
// exactly (the all-to-alls copy, the rank-order all-reduce adds in the
// Trainer's order): within 1e-5, and the test prints whether bit for bit;
// a row-wise table sums its owners' partial sums, within 1e-4. Skips
// without NCCL.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/base/device.h"
#include "engine/engine_options.h"
#include "engine/error.h"
#include "tests/train/train_test_util.h"
#include "tools/train/dist/nccl_communicator.h"
#include "tools/train/dist/sharded_schedule.h"
#include "tools/train/dist/sharded_trainer.h"
#include "tools/train/model_state.h"
#include "tools/train/trainer.h"

namespace ember::train {
namespace {

constexpr int64_t kGlobalBatch = 64;
constexpr int kSteps = 8;
constexpr engine::Context kGpu0 = engine::Context::GPU(0);

ModelConfig Model(Optimizer optimizer) {
  ModelConfig m = testing::TinyModel(optimizer);
  m.table_rows = {500, 1200, 2000, 800, 640};
  return m;
}

std::unique_ptr<BatchSource> Data(const ModelConfig& model) {
  return std::make_unique<SyntheticSource>(testing::TinyData(model, kGlobalBatch, kEndless));
}

// The run to compare with: one GPU, the schedule's single-process twin,
// the dense gradients summed over `ranks` slices.
struct Reference {
  std::vector<float> losses;
  ModelState state;
};

Reference RunUnsharded(const std::string& engine_name, const ModelConfig& model,
                       ShardedSchedule schedule, int ranks) {
  auto engine = testing::NewEngine(engine_name);
  TrainOptions options = testing::TinyOptions(model, SingleProcessTwin(schedule), kSteps, kGpu0);
  options.placement.dense_grad_slices = ranks;
  Trainer trainer(*engine, options, Data(model), nullptr);
  Reference ref;
  for (const StepRecord& r : trainer.Run().records) ref.losses.push_back(r.loss);
  ref.state = ReadModelState(trainer.model());
  return ref;
}

ShardedTrainResult RunSharded(const std::string& engine_name, const ModelConfig& model,
                              ShardedSchedule schedule, const std::string& plan, int ranks) {
  ShardedTrainOptions options;
  options.model = model;
  options.plan = ParseShardPlan(plan, model.num_tables(), ranks);
  options.schedule = schedule;
  options.steps = kSteps;
  options.cache = testing::TinyOptions(model, Schedule::kBaseline, kSteps, kGpu0).placement.cache;
  options.engine = engine::ParseEngineType(engine_name);
  options.gpus = true;
  options.nccl.timeout = std::chrono::milliseconds(20'000);
  return TrainSharded(options, [&] { return Data(model); });
}

struct Case {
  std::string engine;
  int ranks;
  std::string plan;
  bool row_wise = false;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.engine << " " << c.ranks << " GPU(s) " << c.plan;
}

class ShardedGpuTest
    : public ::testing::TestWithParam<std::tuple<Case, ShardedSchedule, Optimizer>> {
 protected:
  void SetUp() override {
    if (!NcclAvailable()) GTEST_SKIP() << "this build has no NCCL";
    const int ranks = std::get<0>(GetParam()).ranks;
    if (GpuCount() < ranks) {
      GTEST_SKIP() << ranks << " rank(s) need as many GPUs; this machine has " << GpuCount();
    }
    ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  }
};

TEST_P(ShardedGpuTest, EqualsOneGpusTrainer) {
  const Case& c = std::get<0>(GetParam());
  const ShardedSchedule schedule = std::get<1>(GetParam());
  const ModelConfig model = Model(std::get<2>(GetParam()));
  const Reference ref = RunUnsharded(c.engine, model, schedule, c.ranks);
  const ShardedTrainResult run = RunSharded(c.engine, model, schedule, c.plan, c.ranks);
  ASSERT_EQ(run.losses.size(), ref.losses.size());
  for (size_t s = 0; s < ref.losses.size(); ++s) {
    EXPECT_NEAR(run.losses[s], ref.losses[s], 1e-5 * std::abs(ref.losses[s])) << "step " << s;
  }
  const StateDifference diff = CompareStates(run.state, ref.state);
  std::printf("  %s\n", diff.Describe().c_str());
  EXPECT_TRUE(diff.unmatched.empty()) << diff.Describe();
  // The all-to-alls copy and the all-reduce adds in the Trainer's order,
  // so the values agree within float tolerance (bit for bit where the GPU
  // kernels sum each value in one order whatever the batch around it); a
  // row-wise table's partial sums within 1e-4.
  const double tol = c.row_wise ? 1e-4 : 1e-5;
  for (const auto& [name, want] : ref.state) {
    const std::vector<float>& got = run.state.at(name);
    ASSERT_EQ(got.size(), want.size()) << name;
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], tol * std::max(1.0f, std::abs(want[i])))
          << name << "[" << i << "]";
    }
  }
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (const char* engine : {"ThreadedEnginePerDevice", "ThreadedEnginePerDeviceAsync"}) {
    cases.push_back({engine, 1, "0:0,1:0,2:0,3:0,4:0"});
    cases.push_back({engine, 2, "0:0,1:1,2:0,3:1,4:1"});
  }
  cases.push_back({"ThreadedEnginePerDeviceAsync", 2, "0:0,1:row,2:1,3:row,4:0", true});
  return cases;
}

std::string CaseName(
    const ::testing::TestParamInfo<std::tuple<Case, ShardedSchedule, Optimizer>>& info) {
  const Case& c = std::get<0>(info.param);
  std::string name = c.engine + "_" + std::to_string(c.ranks) + "gpus" +
                     (c.row_wise ? "_rowwise_" : "_") +
                     std::string(ToString(std::get<1>(info.param))) + "_" +
                     std::string(ToString(std::get<2>(info.param)));
  std::erase(name, '-');
  return name;
}

// Every schedule with row-wise Adagrad, and the other optimizers under
// sparse-dist, for each case.
std::vector<std::tuple<Case, ShardedSchedule, Optimizer>> Params() {
  std::vector<std::tuple<Case, ShardedSchedule, Optimizer>> params;
  for (const Case& c : Cases()) {
    for (ShardedSchedule schedule : AllShardedSchedules()) {
      params.emplace_back(c, schedule, Optimizer::kAdagrad);
    }
    params.emplace_back(c, ShardedSchedule::kSparseDist, Optimizer::kSgd);
    params.emplace_back(c, ShardedSchedule::kSparseDist, Optimizer::kAdam);
  }
  return params;
}

INSTANTIATE_TEST_SUITE_P(Dist, ShardedGpuTest, ::testing::ValuesIn(Params()), CaseName);

// Two GPU ranks in one process under lazy kernel loading can hang
// (kernel_loading.h), so TrainSharded refuses them before any rank starts.
// This binary asks for eager loading (kernel_loading_test.cc): the refusal
// shows in a run with CUDA_MODULE_LOADING=LAZY.
TEST(ShardedGpuLoadingTest, TwoRanksUnderLazyLoadingAreRefused) {
  if (!NcclAvailable()) GTEST_SKIP() << "this build has no NCCL";
  if (GpuCount() < 2) GTEST_SKIP() << "needs two GPUs; this machine has " << GpuCount();
  if (!CudaLoadsKernelsLazily()) {
    GTEST_SKIP() << "kernels load eagerly in this run; run with CUDA_MODULE_LOADING=LAZY";
  }
  const ModelConfig model = Model(Optimizer::kSgd);
  try {
    (void)RunSharded("ThreadedEnginePerDeviceAsync", model, ShardedSchedule::kSparseDist,
                     "0:0,1:1,2:0,3:1,4:1", 2);
    FAIL() << "two GPU ranks trained under lazy kernel loading";
  } catch (const Unavailable& e) {
    EXPECT_NE(std::string(e.what()).find("Set CUDA_MODULE_LOADING=EAGER"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace ember::train
