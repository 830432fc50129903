// Checkpoints (checkpoint.h, checkpoint_file.h): training N steps,
// checkpointing, resuming and training N more gives bit for bit the
// weights and losses of 2N steps straight; a checkpoint of another shape
// is refused naming what differs; a damaged file is refused; and a writer
// killed at any moment leaves the previous checkpoint whole and loadable.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/train/train_test_util.h"
#include "tools/train/checkpoint.h"
#include "tools/train/checkpoint_file.h"
#include "tools/train/data/synthetic_source.h"
#include "tools/train/trainer.h"

namespace ember::train::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// A directory of its own per test, removed after it.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string(info->test_suite_name()) + "." + info->name();
    for (char& c : name) {
      if (c == '/') c = '_';
    }
    path_ = fs::temp_directory_path() / ("ember_ckpt_" + name + "_" + std::to_string(::getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  [[nodiscard]] std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

struct Outcome {
  std::vector<float> losses;
  std::map<std::string, std::vector<float>> weights;
  TrainResult result;
};

Outcome Train(const TrainOptions& options) {
  auto engine = NewEngine("ThreadedEnginePerDevice");
  Outcome out;
  {
    Trainer trainer(*engine, options,
                    std::make_unique<SyntheticSource>(TinyData(options.model, 32, kEndless)),
                    nullptr);
    out.result = trainer.Run();
    out.weights = ReadWeights(trainer.model());
  }
  for (const StepRecord& r : out.result.records) out.losses.push_back(r.loss);
  return out;
}

using Case = std::tuple<Schedule, Optimizer>;
class ResumeTest : public ::testing::TestWithParam<Case> {};

TEST_P(ResumeTest, CheckpointAndResumeEqualsTrainingStraight) {
  constexpr int64_t kN = 12;
  const auto [schedule, optimizer] = GetParam();
  const ModelConfig model = TinyModel(optimizer);
  const Outcome straight = Train(TinyOptions(model, schedule, 2 * kN));

  TempDir dir;
  TrainOptions first = TinyOptions(model, schedule, kN);
  first.checkpoint_dir = dir.str();
  const Outcome a = Train(first);
  ASSERT_EQ(a.result.checkpoints.size(), 1u);
  TrainOptions second = TinyOptions(model, schedule, 2 * kN);
  second.checkpoint_dir = dir.str();
  second.resume = true;
  const Outcome b = Train(second);
  EXPECT_EQ(b.result.first_step, kN);
  EXPECT_EQ(b.result.steps, kN);

  std::vector<float> losses = a.losses;
  losses.insert(losses.end(), b.losses.begin(), b.losses.end());
  EXPECT_EQ(losses, straight.losses);
  for (const auto& [name, values] : straight.weights) {
    EXPECT_EQ(b.weights.at(name), values) << name << " differs after the resume";
  }
}

std::vector<int64_t> CachedRows(DlrmModel& model) {
  std::vector<int64_t> rows;
  for (int64_t tag : model.tbe().Snapshot().tags) {
    if (tag >= 0) rows.push_back(tag);
  }
  std::sort(rows.begin(), rows.end());
  return rows;
}

TEST(CheckpointTest, ALoadWarmsTheCacheWithTheRowsItHeld) {
  TempDir dir;
  auto engine = NewEngine("ThreadedEnginePerDevice");
  TrainOptions options = TinyOptions(TinyModel(), Schedule::kPrefetch, 10);
  options.checkpoint_dir = dir.str();
  std::vector<int64_t> held;
  {
    Trainer trainer(*engine, options,
                    std::make_unique<SyntheticSource>(TinyData(options.model, 32, kEndless)),
                    nullptr);
    trainer.Run();
    held = CachedRows(trainer.model());
  }
  ASSERT_FALSE(held.empty());
  DlrmModel model(*engine, options.model, options.placement);
  EXPECT_TRUE(CachedRows(model).empty());
  LoadCheckpoint(model, dir.str());
  EXPECT_EQ(CachedRows(model), held);
}

INSTANTIATE_TEST_SUITE_P(
    Train, ResumeTest,
    ::testing::Combine(::testing::Values(Schedule::kBaseline, Schedule::kPrefetch,
                                         Schedule::kFused),
                       ::testing::Values(Optimizer::kSgd, Optimizer::kAdagrad, Optimizer::kAdam)),
    [](const auto& info) {
      return std::string(ToString(std::get<0>(info.param))) + "_" +
             std::string(ToString(std::get<1>(info.param)));
    });

TEST(CheckpointTest, RefusesACheckpointOfAnotherShapeNamingTheDifferences) {
  TempDir dir;
  auto engine = NewEngine("ThreadedEnginePerDevice");
  const ModelConfig saved = TinyModel(Optimizer::kAdagrad);
  const TrainOptions options = TinyOptions(saved, Schedule::kBaseline, 1);
  {
    DlrmModel model(*engine, saved, options.placement);
    model.Initialize();
    SaveCheckpoint(model, dir.str(), {3, 96});
  }
  ModelConfig other = saved;
  other.table_rows[1] = 121;
  other.bottom_mlp = {8, 8};
  other.optimizer.kind = Optimizer::kAdam;
  DlrmModel model(*engine, other, options.placement);
  try {
    LoadCheckpoint(model, dir.str());
    ADD_FAILURE() << "loaded a checkpoint of another shape";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("[LoadCheckpoint]"));
    EXPECT_THAT(e.what(), HasSubstr("holds another model"));
    EXPECT_THAT(e.what(), HasSubstr("table 1 rows: the checkpoint has 120, this model 121"));
    EXPECT_THAT(e.what(), HasSubstr("bottom MLP: the checkpoint has [8], this model [8, 8]"));
    EXPECT_THAT(e.what(), HasSubstr("optimizer: the checkpoint has adagrad, this model adam"));
  }
  // The same shape with another learning rate loads.
  ModelConfig same = saved;
  same.optimizer.dense_lr = 0.5f;
  DlrmModel loaded(*engine, same, options.placement);
  const CheckpointPoint point = LoadCheckpoint(loaded, dir.str());
  EXPECT_EQ(point.step, 3);
  EXPECT_EQ(point.position, 96);
}

TEST(CheckpointTest, ResumeWithoutACheckpointIsRefused) {
  TempDir dir;
  TrainOptions options = TinyOptions(TinyModel(), Schedule::kBaseline, 2);
  options.checkpoint_dir = dir.str();
  options.resume = true;
  try {
    Train(options);
    ADD_FAILURE() << "resumed from nothing";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("checkpoint.ember: cannot open"));
  }
}

TEST(CheckpointTest, ResumeAskingForFewerStepsThanTheCheckpointHoldsIsRefused) {
  TempDir dir;
  const ModelConfig model = TinyModel();
  TrainOptions first = TinyOptions(model, Schedule::kBaseline, 6);
  first.checkpoint_dir = dir.str();
  (void)Train(first);
  TrainOptions second = TinyOptions(model, Schedule::kBaseline, 4);
  second.checkpoint_dir = dir.str();
  second.resume = true;
  try {
    (void)Train(second);
    ADD_FAILURE() << "resumed past the steps asked for";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("is at step 6, past the 4 steps asked for"));
  }
  second.steps = 6;  // the run is done: nothing left to train, no error
  EXPECT_EQ(Train(second).result.steps, 0);
}

// A file with one section of `n` floats, all equal to `step`.
void WriteNumbered(const std::string& path, int64_t step, std::vector<float>& scratch) {
  std::fill(scratch.begin(), scratch.end(), static_cast<float>(step));
  CheckpointHeader header;
  header.model = TinyModel();
  header.step = step;
  header.position = step * 10;
  WriteCheckpointFile(
      path, header,
      {{"data", storage::DType::kF32, {static_cast<int64_t>(scratch.size())}, scratch.data()}});
}

// Reads the file back and checks that it is one whole checkpoint: its data
// agrees with its header's step.
int64_t CheckWhole(const std::string& path) {
  const CheckpointFile file = CheckpointFile::Open(path);
  const CheckpointFile::Section* data = file.Find("data");
  EXPECT_NE(data, nullptr);
  if (data == nullptr) return -1;
  std::vector<float> values(data->bytes / sizeof(float));
  file.Read(*data, values.data());
  const auto step = static_cast<float>(file.header().step);
  EXPECT_TRUE(std::all_of(values.begin(), values.end(), [&](float v) { return v == step; }));
  EXPECT_EQ(file.header().position, file.header().step * 10);
  return file.header().step;
}

TEST(CheckpointFileTest, AWriterKilledAtAnyMomentLeavesThePreviousCheckpoint) {
  TempDir dir;
  const std::string path = dir.str() + "/checkpoint.ember";
  std::vector<float> scratch(std::size_t{4} << 20);  // 16 MiB a write: kills land mid-write
  WriteNumbered(path, 0, scratch);
  std::mt19937 rng(std::random_device{}());
  int64_t last = 0;
  for (int round = 0; round < 8; ++round) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      // The child only writes files: no engine, no threads of its own.
      for (int64_t step = last + 1;; ++step) WriteNumbered(path, step, scratch);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5 + rng() % 60));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status));
    const int64_t step = CheckWhole(path);
    EXPECT_GE(step, last) << "an older checkpoint replaced a newer one";
    last = step;
  }
  // The next write removes the temp files the killed writers left, so that
  // repeated preemptions do not fill the disk.
  WriteNumbered(path, last + 1, scratch);
  EXPECT_EQ(CheckWhole(path), last + 1);
  for (const auto& entry : fs::directory_iterator(dir.str())) {
    EXPECT_EQ(entry.path().filename().string(), "checkpoint.ember") << "left behind";
  }
}

TEST(CheckpointFileTest, ATempFileNeverStandsForTheCheckpoint) {
  TempDir dir;
  const std::string path = dir.str() + "/checkpoint.ember";
  std::vector<float> scratch(1000);
  WriteNumbered(path, 5, scratch);
  // What a writer killed mid-write leaves: a partial temp file.
  const std::string temp = dir.str() + "/.checkpoint.ember.tmp-" + std::to_string(::getpid());
  {
    std::ofstream partial(temp, std::ios::binary);
    partial << "EMBRCKPT\x01";
  }
  EXPECT_EQ(CheckWhole(path), 5);
  WriteNumbered(path, 6, scratch);  // replaces that temp file, then renames it
  EXPECT_EQ(CheckWhole(path), 6);
  EXPECT_FALSE(fs::exists(temp));
}

TEST(CheckpointFileTest, ADamagedOrTruncatedFileIsRefused) {
  TempDir dir;
  const std::string path = dir.str() + "/checkpoint.ember";
  std::vector<float> scratch(1000);
  WriteNumbered(path, 5, scratch);
  const auto size = fs::file_size(path);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size / 2));
    f.put('\x7f');
  }
  EXPECT_THAT([&] { (void)CheckpointFile::Open(path); },
              ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("checksum mismatch")));
  WriteNumbered(path, 5, scratch);
  fs::resize_file(path, size - 100);
  EXPECT_THAT([&] { (void)CheckpointFile::Open(path); },
              ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("truncated at byte")));
  std::ofstream(path) << "not a checkpoint at all";
  EXPECT_THAT([&] { (void)CheckpointFile::Open(path); },
              ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("not an Ember checkpoint")));
}

TEST(CheckpointFileTest, AnUnwritableDirectoryIsAnErrorNamingThePath) {
  std::vector<float> scratch(10);
  EXPECT_THAT([&] { WriteNumbered("/nonexistent-dir/checkpoint.ember", 1, scratch); },
              ::testing::ThrowsMessage<Error>(HasSubstr("cannot create '/nonexistent-dir/")));
}

}  // namespace
}  // namespace ember::train::testing
