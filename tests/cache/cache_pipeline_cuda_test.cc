// The prefetch pipeline's overlap, measured rather than assumed: under
// ThreadedEnginePerDeviceAsync on a GPU, with the engine's profile on, each
// step pushes Prefetch(i+1) before Forward(i) (docs/cache.md), and the
// profile's device spans (CUDA events on the ops' streams) must show the
// two running at the same time. Skips without a GPU.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cache/cached_tbe.h"
#include "engine/base/device.h"
#include "engine/engine.h"
#include "ops/elementwise.h"
#include "tests/cache/cache_test_util.h"

namespace ember::cache::testing {
namespace {

using engine::Context;

struct Span {
  double begin_us = 0.0;
  double end_us = 0.0;
};

// The device spans ("cat":"gpu") of the engine's Chrome trace at `path`,
// per op name, in order of their start.
std::map<std::string, std::vector<Span>> GpuSpans(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "no profile at " << path;
  const std::regex event(R"re("name":"([^"]*)","cat":"gpu",.*"ts":([0-9.]+),"dur":([0-9.]+))re");
  std::map<std::string, std::vector<Span>> spans;
  std::smatch m;
  for (std::string line; std::getline(in, line);) {
    if (!std::regex_search(line, m, event)) continue;
    const double begin = std::stod(m[2].str());
    spans[m[1].str()].push_back({begin, begin + std::stod(m[3].str())});
  }
  for (auto& [name, list] : spans) {
    std::sort(list.begin(), list.end(),
              [](const Span& a, const Span& b) { return a.begin_us < b.begin_us; });
  }
  return spans;
}

double Overlap(const Span& a, const Span& b) {
  return std::max(0.0, std::min(a.end_us, b.end_us) - std::max(a.begin_us, b.begin_us));
}

// A batch of `batch_size` bags of `pooling` uniform rows in each table.
Batch UniformBatch(engine::Engine& engine, std::mt19937_64& rng, int tables, int64_t rows,
                   int64_t batch_size, int64_t pooling) {
  std::uniform_int_distribution<int64_t> row(0, rows - 1);
  std::vector<std::vector<int64_t>> bags(static_cast<std::size_t>(tables * batch_size));
  for (std::vector<int64_t>& bag : bags) {
    for (int64_t l = 0; l < pooling; ++l) bag.push_back(row(rng));
  }
  return MakeBatch(engine, Context::GPU(0), tables, batch_size, bags);
}

struct Overlaps {
  int steps = 0;       // pairs (prefetch(i+1), forward(i)) in the trace
  int overlapped = 0;  // of those, the pairs that ran at the same time
  double overlap_us = 0.0;
};

// kSteps training steps through a GPU cache, with the engine's profile on;
// the prefetch of batch i+1 is pushed before the forward of batch i
// (`ahead`, the prefetch pipeline) or after the backward of batch i (the
// baseline order). What the profile shows of the two.
Overlaps RunSteps(bool ahead) {
  constexpr int kTables = 4;
  constexpr int64_t kRows = 200'000;
  constexpr int64_t kDim = 64;
  constexpr int64_t kBatch = 4096;
  constexpr int64_t kPooling = 16;
  constexpr int kSteps = 8;
  const std::string path = ::testing::TempDir() + "ember_cache_pipeline_profile.json";
  std::remove(path.c_str());
  {
    engine::EngineOptions engine_options;
    engine_options.type = engine::EngineType::kThreadedPerDevice;
    engine_options.async_gpu = true;
    engine_options.profile_path = path;
    auto engine = engine::CreateEngine(engine_options);
    CacheOptions options;
    options.ctx = Context::GPU(0);
    options.load_factor = 0.1;  // uniform rows: most of each batch misses
    CachedTbe tbe(
        *engine,
        ops::TbeTables(std::vector<int64_t>(kTables, kRows), std::vector<int64_t>(kTables, kDim)),
        options);
    ops::RandomUniform(tbe.home(), 3, -0.1f, 0.1f);
    std::mt19937_64 rng(17);
    std::vector<Batch> batches;
    std::vector<CacheLocations> where;
    for (int i = 0; i < kSteps; ++i) {
      batches.push_back(UniformBatch(*engine, rng, kTables, kRows, kBatch, kPooling));
      where.push_back(tbe.NewLocations(kTables * kBatch * kPooling));
    }
    storage::Tensor out = storage::Tensor::Empty(*engine, {kBatch, kTables * kDim},
                                                 storage::DType::kF32, Context::GPU(0));
    storage::Tensor grad =
        FromHost(*engine, Context::GPU(0), std::vector<float>(kBatch * kTables * kDim, 0.001f),
                 {kBatch, kTables * kDim});
    engine->WaitForAll();  // the set-up's ops are not in the steps' spans
    if (ahead) tbe.Prefetch(batches[0].view(), where[0]);
    for (int i = 0; i < kSteps; ++i) {
      if (!ahead) tbe.Prefetch(batches[i].view(), where[i]);
      if (ahead && i + 1 < kSteps) tbe.Prefetch(batches[i + 1].view(), where[i + 1]);
      tbe.Forward(batches[i].view(), where[i], out);
      tbe.Relookup(batches[i].view(), where[i]);
      tbe.BackwardSgd(batches[i].view(), where[i], grad, {.learning_rate = 0.01f});
    }
    engine->WaitForAll();
  }  // the profile is written as the engine goes
  const std::map<std::string, std::vector<Span>> spans = GpuSpans(path);
  const auto prefetches = spans.find("CachedTbe::Prefetch");
  const auto forwards = spans.find("EmbeddingBagForward");
  Overlaps o;
  if (prefetches == spans.end() || forwards == spans.end()) {
    ADD_FAILURE() << "no device span of a prefetch or of a forward in " << path;
    return o;
  }
  EXPECT_EQ(prefetches->second.size(), static_cast<std::size_t>(kSteps));
  EXPECT_EQ(forwards->second.size(), static_cast<std::size_t>(kSteps));
  const auto pairs = std::min(prefetches->second.size(), forwards->second.size());
  for (std::size_t i = 0; i + 1 < pairs; ++i) {
    const double us = Overlap(prefetches->second[i + 1], forwards->second[i]);
    ++o.steps;
    o.overlapped += us > 0.0 ? 1 : 0;
    o.overlap_us += us;
  }
  std::printf("%s: prefetch(i+1) overlapped forward(i) in %d of %d steps, %.1f us in all\n",
              ahead ? "prefetch order" : "baseline order", o.overlapped, o.steps, o.overlap_us);
  return o;
}

TEST(CachePipelineProfileTest, PrefetchOfTheNextBatchOverlapsTheForward) {
  if (ember::GpuCount() == 0) GTEST_SKIP() << "no CUDA device";
  const Overlaps o = RunSteps(/*ahead=*/true);
  EXPECT_GE(o.overlapped, o.steps / 2) << "prefetch(i+1) and forward(i) ran one after the other";
  EXPECT_GT(o.overlap_us, 0.0);
}

// The control: pushed after the backward of batch i, the prefetch of batch
// i+1 waits for it (it reads the home rows the backward writes), which
// waits for the forward: the profile must show no overlap at all.
TEST(CachePipelineProfileTest, ControlInTheBaselineOrderNothingOverlaps) {
  if (ember::GpuCount() == 0) GTEST_SKIP() << "no CUDA device";
  const Overlaps o = RunSteps(/*ahead=*/false);
  EXPECT_GT(o.steps, 0);
  EXPECT_EQ(o.overlapped, 0);
}

}  // namespace
}  // namespace ember::cache::testing
