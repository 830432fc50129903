// The runtime on a GPU (skipped without one): baseline, prefetch and fused
// bit-identical there too, on the plain and the Async per-device engines;
// checkpoint + resume equal to training straight; and the GPU run close to
// the CPU run of the same model and data (their matmuls round differently:
// cuBLAS and the CPU BLAS sum in other orders, so 1e-3 relative on the
// losses of 20 steps); TF32 matmuls close to f32 ones.
//
// cuBLAS gives run-to-run identical results for a fixed workspace setting;
// CUBLAS_WORKSPACE_CONFIG is set before any engine (and so any cuBLAS
// handle) is made.

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/base/device.h"
#include "tests/train/train_test_util.h"
#include "tools/train/data/synthetic_source.h"
#include "tools/train/runs.h"
#include "tools/train/trace_analysis.h"
#include "tools/train/trainer.h"

namespace ember::train::testing {
namespace {

constexpr engine::Context kGpu = engine::Context::GPU(0);

struct Outcome {
  std::vector<float> losses;
  std::map<std::string, std::vector<float>> weights;
};

Outcome Train(const std::string& engine_name, const TrainOptions& options) {
  auto engine = NewEngine(engine_name);
  Outcome out;
  TrainResult result;
  {
    Trainer trainer(*engine, options,
                    std::make_unique<SyntheticSource>(TinyData(options.model, 64, kEndless)),
                    nullptr);
    result = trainer.Run();
    out.weights = ReadWeights(trainer.model());
  }
  for (const StepRecord& r : result.records) out.losses.push_back(r.loss);
  return out;
}

// The first step whose loss differs (the size when none does), to tell a
// one-off race near a step from a drift from the start.
std::size_t FirstDifference(const std::vector<float>& a, const std::vector<float>& b) {
  std::size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return i;
}

class GpuTrainTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GpuCount() == 0) GTEST_SKIP() << "no CUDA device";
    ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  }
};

TEST_P(GpuTrainTest, BaselinePrefetchAndFusedAreBitIdentical) {
  for (Optimizer optimizer : {Optimizer::kSgd, Optimizer::kAdagrad, Optimizer::kAdam}) {
    SCOPED_TRACE(ToString(optimizer));
    const ModelConfig model = TinyModel(optimizer);
    const Outcome baseline = Train(GetParam(), TinyOptions(model, Schedule::kBaseline, 30, kGpu));
    for (Schedule schedule : {Schedule::kPrefetch, Schedule::kFused}) {
      SCOPED_TRACE(ToString(schedule));
      const Outcome other = Train(GetParam(), TinyOptions(model, schedule, 30, kGpu));
      EXPECT_EQ(other.losses, baseline.losses)
          << "first differing step: " << FirstDifference(other.losses, baseline.losses);
      for (const auto& [name, values] : baseline.weights) {
        EXPECT_EQ(other.weights.at(name), values) << name << " differs";
      }
    }
  }
}

TEST_P(GpuTrainTest, CheckpointAndResumeEqualsTrainingStraight) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("ember_gpu_ckpt_" + std::to_string(::getpid())))
          .string();
  std::filesystem::create_directories(dir);
  const ModelConfig model = TinyModel(Optimizer::kAdam);
  const Outcome straight = Train(GetParam(), TinyOptions(model, Schedule::kPrefetch, 20, kGpu));
  TrainOptions first = TinyOptions(model, Schedule::kPrefetch, 10, kGpu);
  first.checkpoint_dir = dir;
  const Outcome a = Train(GetParam(), first);
  TrainOptions second = TinyOptions(model, Schedule::kPrefetch, 20, kGpu);
  second.checkpoint_dir = dir;
  second.resume = true;
  const Outcome b = Train(GetParam(), second);
  std::vector<float> losses = a.losses;
  losses.insert(losses.end(), b.losses.begin(), b.losses.end());
  EXPECT_EQ(losses, straight.losses);
  for (const auto& [name, values] : straight.weights) {
    EXPECT_EQ(b.weights.at(name), values) << name << " differs after the resume";
  }
  std::filesystem::remove_all(dir);
}

TEST_P(GpuTrainTest, TheGpuRunIsCloseToTheCpuRun) {
  const ModelConfig model = TinyModel(Optimizer::kAdagrad);
  const Outcome gpu = Train(GetParam(), TinyOptions(model, Schedule::kFused, 20, kGpu));
  const Outcome cpu = Train("ThreadedEnginePerDevice", TinyOptions(model, Schedule::kFused, 20));
  ASSERT_EQ(gpu.losses.size(), cpu.losses.size());
  for (std::size_t i = 0; i < gpu.losses.size(); ++i) {
    EXPECT_NEAR(gpu.losses[i], cpu.losses[i], 1e-3 * std::abs(cpu.losses[i])) << "step " << i;
  }
}

// TF32 matmuls (ModelConfig::matmul_precision) train the same model to
// within TF32's rounding of the f32 run, and do round: the losses differ.
TEST_P(GpuTrainTest, Tf32MatmulsTrainCloseToFloat32) {
  ModelConfig model = TinyModel(Optimizer::kAdagrad);
  const Outcome f32 = Train(GetParam(), TinyOptions(model, Schedule::kFused, 20, kGpu));
  model.matmul_precision = ops::MatmulPrecision::kTensorFloat32;
  EXPECT_NE(model.Describe().find("TF32"), std::string::npos) << model.Describe();
  const Outcome tf32 = Train(GetParam(), TinyOptions(model, Schedule::kFused, 20, kGpu));
  ASSERT_EQ(tf32.losses.size(), f32.losses.size());
  for (std::size_t i = 0; i < f32.losses.size(); ++i) {
    EXPECT_NEAR(tf32.losses[i], f32.losses[i], 1e-2 * std::abs(f32.losses[i])) << "step " << i;
  }
  EXPECT_NE(tf32.losses, f32.losses) << "TF32 allowed, yet every loss is f32's to the bit";
}

// A GPU op waits for its inputs on its stream (under the Async engines,
// with CUDA events), holding up every op queued behind it there. fused and
// semisync push the lookup of batch i+1 while batch i still has dense ops
// to push, and the lookup waits for its prefetch: it must run on streams
// the dense ops do not use, or they wait for the prefetch too (semisync's
// step was a third longer than prefetch's, docs/benchmarks.md). Every
// schedule's lookups run there.
TEST_P(GpuTrainTest, LookupsRunOnStreamsTheDenseOpsDoNotUse) {
  const ModelConfig model = TinyModel();
  const DataFactory data{
      .train = [&] { return std::make_unique<SyntheticSource>(TinyData(model, 64, kEndless)); },
      .held_out = nullptr};
  for (Schedule schedule : AllSchedules()) {
    SCOPED_TRACE(ToString(schedule));
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("ember_gpu_lookup_streams_" + std::to_string(::getpid()) + ".json"))
                                 .string();
    ASSERT_TRUE(TraceSteps(TinyOptions(model, schedule, 0, kGpu),
                           engine::ParseEngineType(GetParam()), path, /*steps=*/4,
                           /*warmup=*/2, data)
                    .has_value());
    const ChromeTrace trace = ReadChromeTrace(path);
    std::filesystem::remove(path);
    // Where an op ran: its stream under the Async engines (device spans);
    // the plain engines have no device spans, and their ops hold a thread
    // of their own pool until their GPU work is done.
    std::map<uint64_t, std::string> row_names(trace.rows.begin(), trace.rows.end());
    const bool streams = std::any_of(trace.spans.begin(), trace.spans.end(), [&](const auto& s) {
      return row_names[s.row].starts_with("gpu0 stream");
    });
    std::set<std::string> lookup_rows;
    std::set<std::string> dense_rows;
    for (const TraceSpan& span : trace.spans) {
      const std::string& row = row_names[span.row];
      if (row.starts_with("gpu0 stream") != streams) continue;
      if (span.name == "EmbeddingBagForward") lookup_rows.insert(row);
      if (span.name == "Matmul") dense_rows.insert(row);
    }
    EXPECT_FALSE(lookup_rows.empty()) << "no span of a lookup";
    EXPECT_FALSE(dense_rows.empty()) << "no span of a matmul";
    for (const std::string& row : lookup_rows) {
      EXPECT_FALSE(dense_rows.contains(row)) << "a lookup and a matmul both ran on " << row;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Train, GpuTrainTest,
                         ::testing::Values("ThreadedEnginePerDevice",
                                           "ThreadedEnginePerDeviceAsync"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace ember::train::testing
