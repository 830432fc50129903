// The run's lifecycle (trainer.h): at the end of the data every batch in
// flight completes, the last short one included, in every schedule, also
// when evaluations drain and refill the pipeline between steps; a failing
// op stops the run with the op's message and the step, and nothing after
// it runs unreported; a batch of another shape is refused on the host; a
// stop request finishes the step in flight and checkpoints.

#include <atomic>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/error.h"
#include "tests/train/data_test_util.h"
#include "tests/train/train_test_util.h"
#include "tools/train/checkpoint_file.h"
#include "tools/train/data/batch_source.h"
#include "tools/train/data/synthetic_source.h"
#include "tools/train/runs.h"
#include "tools/train/trainer.h"

namespace ember::train::testing {
namespace {

using ::testing::HasSubstr;

class LifecycleTest : public ::testing::TestWithParam<Schedule> {};

TEST_P(LifecycleTest, EveryBatchTrainsTheLastShortOneIncluded) {
  constexpr int64_t kBatch = 16;
  constexpr int64_t kExamples = 10 * kBatch + 5;  // 11 batches, the last of 5
  auto engine = NewEngine("ThreadedEnginePerDevice");
  const ModelConfig model = TinyModel();
  TrainOptions options = TinyOptions(model, GetParam(), /*steps=*/0);
  options.eval_every = 3;  // drains and refills the pipeline three times
  std::vector<int64_t> evaluated_at;
  RunHooks hooks;
  hooks.on_eval = [&](const EvalResult& r) { evaluated_at.push_back(r.step); };
  TrainResult result;
  {
    Trainer trainer(*engine, options,
                    std::make_unique<SyntheticSource>(TinyData(model, kBatch, kExamples)),
                    std::make_unique<SyntheticSource>(TinyData(model, 64, 200, 99)));
    result = trainer.Run(hooks);
  }
  EXPECT_EQ(result.steps, 11);
  EXPECT_EQ(result.examples, kExamples);
  EXPECT_EQ(result.position, kExamples);
  ASSERT_EQ(result.records.size(), 11u);
  for (std::size_t i = 0; i < result.records.size(); ++i) {
    EXPECT_EQ(result.records[i].step, static_cast<int64_t>(i));
    EXPECT_EQ(result.records[i].examples, i + 1 < result.records.size() ? kBatch : 5);
  }
  EXPECT_EQ(evaluated_at, (std::vector<int64_t>{3, 6, 9, 11}));
  for (const EvalResult& r : result.evals) EXPECT_EQ(r.examples, 200);
  EXPECT_FALSE(result.stopped);
  // Nothing of the run is left: every batch relooked up, no lock held.
  engine->WaitForAll();
}

TEST_P(LifecycleTest, AFailingOpStopsTheRunNamingTheOpAndTheStep) {
  constexpr int64_t kBatch = 16;
  constexpr int64_t kBadStep = 4;
  auto engine = NewEngine("ThreadedEnginePerDevice");
  const ModelConfig model = TinyModel();
  TrainOptions options = TinyOptions(model, GetParam(), 10);
  options.placement.check_batches = false;  // the cache's prefetch finds it, as an op
  options.log_every = 1;
  std::vector<int64_t> done;
  RunHooks hooks;
  hooks.on_progress = [&](const Progress& p) { done.push_back(p.step); };
  auto source = std::make_unique<CorruptingSource>(
      std::make_unique<SyntheticSource>(TinyData(model, kBatch, kEndless)), (kBadStep + 1) * kBatch,
      /*bad_index=*/100000);
  Trainer trainer(*engine, options, std::move(source), nullptr);
  try {
    trainer.Run(hooks);
    ADD_FAILURE() << "the run went on past a failed op";
  } catch (const TrainError& e) {
    EXPECT_THAT(e.what(), HasSubstr("[CachedTbe::Prefetch]"));
    EXPECT_THAT(e.what(), HasSubstr("index 100000 is out of range"));
    // A look-ahead prefetch (of batch 4, pushed in step 3) reaches the
    // trainer through step 3's marker (trainer.h, "Errors").
    const int64_t first = GetParam() == Schedule::kBaseline ? kBadStep : kBadStep - 1;
    EXPECT_GE(e.step(), first);
    EXPECT_LE(e.step(), kBadStep);
    EXPECT_THAT(e.what(), HasSubstr("[Trainer] step " + std::to_string(e.step()) + ": "));
  }
  // No step at or after the failed one was reported done.
  for (int64_t steps : done) EXPECT_LE(steps, kBadStep);
  // Nothing is left running, and nothing is left unreported.
  EXPECT_NO_THROW(engine->WaitForAll());
}

TEST_P(LifecycleTest, ABadBatchIsNamedOnTheHostBeforeAnyOpRuns) {
  constexpr int64_t kBatch = 16;
  auto engine = NewEngine("ThreadedEnginePerDevice");
  const ModelConfig model = TinyModel();
  auto source = std::make_unique<CorruptingSource>(
      std::make_unique<SyntheticSource>(TinyData(model, kBatch, kEndless)), 3 * kBatch, -7);
  Trainer trainer(*engine, TinyOptions(model, GetParam(), 10), std::move(source), nullptr);
  try {
    trainer.Run();
    ADD_FAILURE() << "a bad batch trained";
  } catch (const TrainError& e) {
    EXPECT_EQ(e.step(), 2);
    EXPECT_THAT(e.what(),
                HasSubstr("[Trainer] step 2: [ValidateTbeBatch] table 0, bag 0: index -7"));
  }
  EXPECT_NO_THROW(engine->WaitForAll());
}

// A batch of another model's shape (one table more) is refused on the
// host by CheckBatch, which a run's loader threads call on every batch,
// and by an unchecked Upload, before any op reads it. (A run refuses a
// whole source of another shape earlier, from its spec.)
TEST(DlrmModelTest, ABatchOfAnotherShapeIsRefusedByTheCheck) {
  auto engine = NewEngine("ThreadedEnginePerDevice");
  const ModelConfig model = TinyModel();
  ModelConfig wider = model;
  wider.table_rows.push_back(wider.table_rows.back());
  const TrainOptions options = TinyOptions(model, Schedule::kBaseline, 1);
  DlrmModel m(*engine, model, options.placement);
  SyntheticSource data(TinyData(wider, 16, kEndless));
  const std::optional<HostBatch> batch = data.Next(BatchMemory{engine.get()});
  ASSERT_TRUE(batch.has_value());
  const std::string expected = fmt::format(
      "[DlrmModel::CheckBatch] the batch has 64 dense values, "
      "{} offsets and 16 labels for 16 examples",
      16 * wider.num_tables() + 1);
  ExpectThrowWith<InvalidArgument>([&] { m.CheckBatch(*batch); }, {expected});
  BatchState state;
  ExpectThrowWith<InvalidArgument>([&] { m.Upload(state, *batch); }, {expected});
  EXPECT_NO_THROW(engine->WaitForAll());
}

TEST_P(LifecycleTest, AStopFinishesTheStepInFlightAndCheckpoints) {
  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("ember_stop_" + std::to_string(static_cast<int>(GetParam())) + "_" +
                            std::to_string(::getpid())))
                              .string();
  std::filesystem::create_directories(dir);
  auto engine = NewEngine("ThreadedEnginePerDevice");
  const ModelConfig model = TinyModel();
  TrainOptions options = TinyOptions(model, GetParam(), 1000);
  options.log_every = 1;
  options.checkpoint_dir = dir;
  std::atomic<bool> stop{false};
  RunHooks hooks;
  hooks.stop = &stop;
  hooks.on_progress = [&](const Progress& p) {
    if (p.step == 5) stop = true;  // as Ctrl-C would, between two steps
  };
  TrainResult result;
  {
    Trainer trainer(*engine, options,
                    std::make_unique<SyntheticSource>(TinyData(model, 16, kEndless)), nullptr);
    result = trainer.Run(hooks);
  }
  EXPECT_TRUE(result.stopped);
  EXPECT_GE(result.steps, 6);
  EXPECT_LE(result.steps, 8);
  EXPECT_EQ(static_cast<int64_t>(result.records.size()), result.steps);
  ASSERT_EQ(result.checkpoints.size(), 1u);
  const CheckpointFile file = CheckpointFile::Open(result.checkpoints[0]);
  EXPECT_EQ(file.header().step, result.steps);
  EXPECT_EQ(file.header().position, result.steps * 16);
  std::filesystem::remove_all(dir);
}

// Held-out data that asks the run to stop (as Ctrl-C would) when its
// `stop_at`-th batch is read.
class StoppingSource : public BatchSource {
 public:
  StoppingSource(std::unique_ptr<BatchSource> source, std::atomic<bool>* stop, int64_t stop_at)
      : BatchSource(source->batch_size()),
        source_(std::move(source)),
        stop_(stop),
        stop_at_(stop_at) {}
  [[nodiscard]] const DataSpec& spec() const override { return source_->spec(); }
  [[nodiscard]] int64_t position() const override { return source_->position(); }
  [[nodiscard]] std::optional<int64_t> size() const override { return source_->size(); }
  [[nodiscard]] std::optional<HostBatch> Next(const BatchMemory& memory) override {
    if (++reads_ == stop_at_) *stop_ = true;
    return source_->Next(memory);
  }
  void Seek(int64_t example) override { source_->Seek(example); }

 private:
  std::unique_ptr<BatchSource> source_;
  std::atomic<bool>* stop_;
  int64_t stop_at_;
  int64_t reads_ = 0;
};

// A long evaluation is no reason to ignore Ctrl-C: the stop ends it at its
// next batch, unreported (a part of the held-out data is not its loss), and
// the run stops as from a step.
TEST_P(LifecycleTest, AStopEndsAnEvaluationAtItsNextBatch) {
  auto engine = NewEngine("ThreadedEnginePerDevice");
  const ModelConfig model = TinyModel();
  TrainOptions options = TinyOptions(model, GetParam(), 1000);
  options.eval_every = 4;
  std::atomic<bool> stop{false};
  RunHooks hooks;
  hooks.stop = &stop;
  std::vector<int64_t> evaluated_at;
  hooks.on_eval = [&](const EvalResult& r) { evaluated_at.push_back(r.step); };
  TrainResult result;
  {
    // 20 held-out batches of 8 a evaluation; the stop comes at the second
    // evaluation's fifth batch (the 25th read).
    auto held_out = std::make_unique<StoppingSource>(
        std::make_unique<SyntheticSource>(TinyData(model, 8, 160, 99)), &stop, 25);
    Trainer trainer(*engine, options,
                    std::make_unique<SyntheticSource>(TinyData(model, 16, kEndless)),
                    std::move(held_out));
    result = trainer.Run(hooks);
  }
  EXPECT_TRUE(result.stopped);
  EXPECT_EQ(evaluated_at, (std::vector<int64_t>{4}));  // the second is not reported
  ASSERT_EQ(result.evals.size(), 1u);
  EXPECT_EQ(result.evals[0].examples, 160);
  EXPECT_GE(result.steps, 8);
  EXPECT_LE(result.steps, 10);
  engine->WaitForAll();
}

// Ctrl-C during the short traced run of --trace or --compare stops it too,
// and a few steps make no trace of the schedule: none is analyzed.
TEST_P(LifecycleTest, AStopEndsATracedRunWithoutATrace) {
  const ModelConfig model = TinyModel();
  const TrainOptions options = TinyOptions(model, GetParam(), 0);
  const DataFactory data{
      .train = [&] { return std::make_unique<SyntheticSource>(TinyData(model, 16, kEndless)); },
      .held_out = nullptr};
  const std::string path =
      (std::filesystem::temp_directory_path() /
       fmt::format("ember_trace_stop_{}_{}.json", static_cast<int>(GetParam()), ::getpid()))
          .string();
  const std::atomic<bool> stop{true};
  EXPECT_FALSE(TraceSteps(options, engine::ParseEngineType("ThreadedEnginePerDevice"), path,
                          /*steps=*/1000, /*warmup=*/2, data, &stop)
                   .has_value());
  const std::atomic<bool> go{false};
  const std::optional<TraceAnalysis> trace =
      TraceSteps(options, engine::ParseEngineType("ThreadedEnginePerDevice"), path,
                 /*steps=*/4, /*warmup=*/2, data, &go);
  ASSERT_TRUE(trace.has_value());
  EXPECT_EQ(trace->steps, 4);
  std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Train, LifecycleTest, ::testing::ValuesIn(AllSchedules()),
                         [](const auto& info) { return std::string(ToString(info.param)); });

TEST(TrainOptionsTest, BadOptionsAreRefusedNamingTheOption) {
  TrainOptions o = TinyOptions(TinyModel(), Schedule::kBaseline, -1);
  EXPECT_THAT([&] { o.Validate(); },
              ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("steps = -1 is negative")));
  o.steps = 1;
  o.resume = true;
  EXPECT_THAT([&] { o.Validate(); },
              ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("resume needs a checkpoint")));
  o.resume = false;
  o.model.table_rows[2] = 0;
  EXPECT_THAT([&] { o.Validate(); },
              ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("table 2 has 0 rows")));
}

TEST(TrainOptionsTest, DataOfAnotherShapeIsRefused) {
  auto engine = NewEngine("NaiveEngine");
  const ModelConfig model = TinyModel();
  ModelConfig other = model;
  other.table_rows[0] = 51;
  EXPECT_THAT(
      [&] {
        Trainer trainer(*engine, TinyOptions(model, Schedule::kBaseline, 1),
                        std::make_unique<SyntheticSource>(TinyData(other, 16, 64)), nullptr);
      },
      ::testing::ThrowsMessage<InvalidArgument>(
          HasSubstr("the training data has 4 dense features and 3 tables of [51, 120, 200] rows")));
}

}  // namespace
}  // namespace ember::train::testing
