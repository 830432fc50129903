// The schedules (schedule.h) are push orders over the same ops: baseline,
// prefetch and fused compute bit-identical losses and final weights (home
// rows after a flush, dense parameters, optimizer states), on every engine
// type and with every optimizer, through a cache small enough to evict and
// miss; semisync, whose next batch reads rows without the current batch's
// update, converges close to baseline (docs/train.md states the distance).

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "tests/train/train_test_util.h"
#include "tools/train/data/synthetic_source.h"
#include "tools/train/trainer.h"

namespace ember::train::testing {
namespace {

struct Outcome {
  std::vector<float> losses;
  std::map<std::string, std::vector<float>> weights;
  TrainResult result;
};

Outcome Train(const std::string& engine_name, Schedule schedule, Optimizer optimizer, int64_t steps,
              bool evaluate = false) {
  auto engine = NewEngine(engine_name);
  const ModelConfig model = TinyModel(optimizer);
  TrainOptions options = TinyOptions(model, schedule, steps);
  options.eval_every = evaluate ? steps / 2 : 0;
  std::unique_ptr<BatchSource> held_out;
  if (evaluate) held_out = std::make_unique<SyntheticSource>(TinyData(model, 256, 4096, 99));
  Outcome out;
  {
    Trainer trainer(*engine, options,
                    std::make_unique<SyntheticSource>(TinyData(model, 32, kEndless)),
                    std::move(held_out));
    out.result = trainer.Run();
    out.weights = ReadWeights(trainer.model());
  }
  for (const StepRecord& r : out.result.records) out.losses.push_back(r.loss);
  return out;
}

using Case = std::tuple<std::string, Optimizer>;

class ScheduleTest : public ::testing::TestWithParam<Case> {
 protected:
  [[nodiscard]] const std::string& engine_name() const { return std::get<0>(GetParam()); }
  [[nodiscard]] Optimizer optimizer() const { return std::get<1>(GetParam()); }
};

TEST_P(ScheduleTest, BaselinePrefetchAndFusedAreBitIdentical) {
  constexpr int64_t kSteps = 40;
  const Outcome baseline = Train(engine_name(), Schedule::kBaseline, optimizer(), kSteps);
  ASSERT_EQ(baseline.losses.size(), static_cast<std::size_t>(kSteps));
  // The cache worked for it: rows came and went.
  EXPECT_GT(baseline.result.cache.all.evicted, 0);
  EXPECT_GT(baseline.result.cache.all.unique_misses, 0);
  for (Schedule schedule : {Schedule::kPrefetch, Schedule::kFused}) {
    SCOPED_TRACE(ToString(schedule));
    const Outcome other = Train(engine_name(), schedule, optimizer(), kSteps);
    EXPECT_EQ(other.losses, baseline.losses);
    ASSERT_EQ(other.weights.size(), baseline.weights.size());
    for (const auto& [name, values] : baseline.weights) {
      EXPECT_EQ(other.weights.at(name), values) << name << " differs";
    }
  }
}

TEST_P(ScheduleTest, SemisyncStaysCloseToBaseline) {
  // Stale rows change the numbers, not the training: the first step is
  // identical (nothing is stale yet), the rest stay close.
  constexpr int64_t kSteps = 40;
  const Outcome baseline = Train(engine_name(), Schedule::kBaseline, optimizer(), kSteps);
  const Outcome semisync = Train(engine_name(), Schedule::kSemisync, optimizer(), kSteps);
  ASSERT_EQ(semisync.losses.size(), baseline.losses.size());
  EXPECT_EQ(semisync.losses[0], baseline.losses[0]);
  // The mean over all steps (the same batches for both): a step's own
  // loss is too noisy to compare.
  auto mean = [](const std::vector<float>& v) {
    double sum = 0;
    for (float x : v) sum += x;
    return sum / static_cast<double>(v.size());
  };
  const double b = mean(baseline.losses);
  const double s = mean(semisync.losses);
  EXPECT_NEAR(s, b, 0.02 * b) << "semisync's training loss strays from baseline's";
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  return std::get<0>(info.param) + "_" + std::string(ToString(std::get<1>(info.param)));
}

INSTANTIATE_TEST_SUITE_P(Train, ScheduleTest,
                         ::testing::Combine(::testing::ValuesIn(RuntimeEngineNames()),
                                            ::testing::Values(Optimizer::kSgd, Optimizer::kAdagrad,
                                                              Optimizer::kAdam)),
                         CaseName);

// A pipelined schedule's cache moves its rows with LinkWarpsFor's warps,
// unless the placement names its own; the baseline's with the whole GPU.
TEST(ScheduleLinkWarps, TheTrainerGivesTheCacheTheSchedulesWarps) {
  auto engine = NewEngine("ThreadedEnginePerDevice");
  const ModelConfig model = TinyModel();
  for (Schedule schedule : AllSchedules()) {
    SCOPED_TRACE(ToString(schedule));
    for (const int placed : {0, 40}) {
      TrainOptions options = TinyOptions(model, schedule, 1);
      options.placement.cache.link_warps = placed;
      Trainer trainer(*engine, options,
                      std::make_unique<SyntheticSource>(TinyData(model, 32, kEndless)), nullptr);
      const int expected = placed != 0 ? placed : LinkWarpsFor(schedule);
      EXPECT_EQ(trainer.model().placement().cache.link_warps, expected);
    }
    EXPECT_EQ(LinkWarpsFor(schedule), schedule == Schedule::kBaseline ? 0 : 96);
  }
}

// Convergence on the synthetic click log: held-out loss falls and AUC
// rises well above chance, and semisync ends within the documented
// distance of baseline (docs/train.md: 0.01 in loss, 0.01 in AUC).
TEST(ScheduleConvergence, LossFallsAndSemisyncConvergesLikeBaseline) {
  constexpr int64_t kSteps = 600;
  const Outcome baseline =
      Train("ThreadedEnginePerDevice", Schedule::kBaseline, Optimizer::kAdagrad, kSteps, true);
  const Outcome semisync =
      Train("ThreadedEnginePerDevice", Schedule::kSemisync, Optimizer::kAdagrad, kSteps, true);
  ASSERT_EQ(baseline.result.evals.size(), 2u);
  const EvalResult& mid = baseline.result.evals[0];
  const EvalResult& end = baseline.result.evals[1];
  const StepSummary train = Summarize(baseline.result.records);
  EXPECT_LT(train.tail_loss, baseline.losses.front()) << "training loss did not fall";
  EXPECT_LE(end.loss, mid.loss + 0.005) << "held-out loss rose";
  EXPECT_GT(end.auc, 0.65) << "no better than chance";
  const EvalResult& semi = semisync.result.evals.back();
  EXPECT_NEAR(semi.loss, end.loss, 0.01);
  EXPECT_NEAR(semi.auc, end.auc, 0.01);
}

}  // namespace
}  // namespace ember::train::testing
