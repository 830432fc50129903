// The runtime's measuring pieces: AUC against hand-computed values,
// percentiles, the JSON reader/writer, and the trace analysis on a
// hand-made Chrome trace (busy time as the union of a row's spans, the
// bound, which stages of consecutive steps overlapped).

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/error.h"
#include "tools/train/auc.h"
#include "tools/train/json.h"
#include "tools/train/metrics.h"
#include "tools/train/report.h"
#include "tools/train/trace_analysis.h"

namespace ember::train::testing {
namespace {

TEST(AucTest, MatchesHandComputedValues) {
  EXPECT_DOUBLE_EQ(
      RocAuc(std::vector<float>{0.1f, 0.4f, 0.35f, 0.8f}, std::vector<float>{0, 0, 1, 1}),
      0.75);  // sklearn's example
  EXPECT_DOUBLE_EQ(RocAuc(std::vector<float>{0.9f, 0.8f, 0.1f}, std::vector<float>{1, 1, 0}), 1.0);
  EXPECT_DOUBLE_EQ(RocAuc(std::vector<float>{0.5f, 0.5f}, std::vector<float>{1, 0}), 0.5);  // a tie
  EXPECT_TRUE(std::isnan(RocAuc(std::vector<float>{0.2f, 0.3f}, std::vector<float>{1, 1})));
  // A diverged model's NaN scores: no order, no AUC, and no endless tie scan.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(RocAuc(std::vector<float>{nan, 0.3f}, std::vector<float>{1, 0})));
  EXPECT_TRUE(std::isnan(RocAuc(std::vector<float>{0.1f, nan, 0.9f}, std::vector<float>{1, 0, 1})));
}

TEST(MetricsTest, PercentilesInterpolateBetweenRanks) {
  EXPECT_DOUBLE_EQ(Percentile({4, 1, 3, 2}, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(Percentile({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0.9), 9.1);
  EXPECT_DOUBLE_EQ(Percentile({}, 0.5), 0.0);
  const StepSummary s = Summarize({{0, 0.7f, 10, 0.5, 0.5}, {1, 0.5f, 10, 0.25, 0.75}});
  EXPECT_EQ(s.examples, 20);
  EXPECT_DOUBLE_EQ(s.examples_per_second, 20 / 0.75);
  EXPECT_FLOAT_EQ(s.final_loss, 0.5f);
}

TEST(MetricsTest, TheWarmUpIsLeftOutOfTheTimesNotOfTheLosses) {
  const std::vector<StepRecord> records = {
      {0, 0.9f, 10, 0.25, 0.25}, {1, 0.7f, 10, 0.5, 0.75}, {2, 0.5f, 10, 0.125, 0.875}};
  const StepSummary s = Summarize(records, 1);
  EXPECT_EQ(s.steps, 3);
  EXPECT_EQ(s.timed_steps, 2);
  EXPECT_EQ(s.examples, 20);
  EXPECT_DOUBLE_EQ(s.examples_per_second, 20 / 0.625);
  EXPECT_DOUBLE_EQ(s.p50_ms, 1e3 * (0.5 + 0.125) / 2);
  EXPECT_FLOAT_EQ(s.first_loss, 0.9f);
  EXPECT_FLOAT_EQ(s.final_loss, 0.5f);
  // A warm-up as long as the run still times its last step.
  const StepSummary last = Summarize(records, 10);
  EXPECT_EQ(last.timed_steps, 1);
  EXPECT_DOUBLE_EQ(last.examples_per_second, 10 / 0.125);
}

// A window without a prefetch (the steps after the data's last one) has
// no hit rate: it must not read as 100%.
TEST(ProgressTest, AWindowWithoutPrefetchesShowsNoHitRate) {
  Progress p;
  p.step = 5;
  p.total_steps = 20;
  EXPECT_THAT(FormatProgress(p), ::testing::HasSubstr("cache hit - (no prefetch)"));
  p.cache_hit_rate = 0.25;
  EXPECT_THAT(FormatProgress(p), ::testing::HasSubstr("cache hit 25.0%"));
}

TEST(JsonTest, RoundTrips) {
  Json j = Json::MakeObject()
               .Set("name", "a \"quoted\"\nline")
               .Set("n", int64_t{42})
               .Set("x", 0.25)
               .Set("nan", std::nan(""))
               .Set("list", Json::MakeArray().Push(true).Push(Json()).Push(-3));
  const Json back = Json::Parse(j.Dump(2));
  EXPECT_EQ(back["name"].string(), "a \"quoted\"\nline");
  EXPECT_EQ(back["n"].number(), 42);
  EXPECT_EQ(back["x"].number(), 0.25);
  EXPECT_TRUE(back["nan"].is_null());
  EXPECT_EQ(back["list"].array().size(), 3u);
  EXPECT_EQ(back["missing"]["deeper"].number(), 0.0);
  EXPECT_THAT([] { (void)Json::Parse("{\"a\": [1, 2}"); },
              ::testing::ThrowsMessage<InvalidArgument>(::testing::HasSubstr("expected ']'")));
}

// Two steps on two rows: a copy worker running the prefetches, a compute
// worker running the rest.
ChromeTrace TwoSteps() {
  ChromeTrace t;
  t.rows = {{1, "ember-cpu"}, {2, "ember-cpu-copy"}};
  auto span = [&](const char* name, uint64_t row, double b, double e) {
    t.spans.push_back({name, row, b, e});
  };
  span("CachedTbe::Initialize", 1, 0, 5);  // before the steps: outside the window
  span("CachedTbe::Prefetch", 2, 10, 20);  // prefetch(0)
  span("CachedTbe::Prefetch", 2, 22, 40);  // prefetch(1), during step 0's forward
  span("CachedTbe::Forward", 1, 20, 25);
  span("ConcatColumns", 1, 25, 26);
  span("ConcatColumns", 1, 27, 28);
  span("SigmoidBinaryCrossEntropy", 1, 28, 30);
  span("SplitColumns", 1, 30, 31);
  span("SplitColumns", 1, 32, 33);
  span("AdagradUpdate", 1, 34, 36);
  span("AdagradUpdate", 1, 35, 37);  // overlaps the one before: counted once
  span("Trainer::StepEnd", 1, 37, 38);
  span("CachedTbe::Forward", 1, 40, 45);
  span("ConcatColumns", 1, 45, 46);
  span("ConcatColumns", 1, 46, 47);
  span("SigmoidBinaryCrossEntropy", 1, 47, 49);
  span("SplitColumns", 1, 49, 50);
  span("SplitColumns", 1, 50, 51);
  span("AdagradUpdate", 1, 51, 52);
  span("AdagradUpdate", 1, 52, 53);
  span("Trainer::StepEnd", 1, 54, 56);
  return t;
}

TEST(TraceAnalysisTest, BusyTimeBoundAndOverlaps) {
  const TraceAnalysis a = AnalyzeTrace(TwoSteps());
  EXPECT_EQ(a.steps, 2);
  EXPECT_FALSE(a.device_rows);
  EXPECT_DOUBLE_EQ(a.window_us, 46.0);  // from the first prefetch (10) to the last end (56)
  ASSERT_EQ(a.rows.size(), 2u);
  // ember-cpu: 5+1+1+2+1+1+3 (34..37 once)+1 and 5+1+1+2+1+1+1+1+2 us.
  EXPECT_EQ(a.rows[0].row, "ember-cpu");
  EXPECT_DOUBLE_EQ(a.rows[0].busy_us, 30.0);
  EXPECT_DOUBLE_EQ(a.rows[1].busy_us, 28.0);
  EXPECT_DOUBLE_EQ(a.bound_us_per_step, 15.0);
  EXPECT_EQ(a.bound_row, "ember-cpu");
  // Either row busy: [10, 40] (the prefetches, the first forward between
  // them), [40, 53] and [54, 56].
  EXPECT_DOUBLE_EQ(a.busy_us_per_step, 45.0 / 2);
  auto overlap = [&](const std::string& what) {
    for (const StageOverlap& o : a.overlaps) {
      if (o.what == what) return o;
    }
    ADD_FAILURE() << "no " << what;
    return StageOverlap{};
  };
  // prefetch(1) [22, 40] against step 0: embedding forward [20, 25] (3 us),
  // dense forward [25, 30] (5 us), dense backward [30, 33] (3 us).
  EXPECT_DOUBLE_EQ(overlap("prefetch(i+1) | embedding forward(i)").overlap_us, 3.0);
  EXPECT_EQ(overlap("prefetch(i+1) | dense forward(i)").overlapped, 1);
  EXPECT_DOUBLE_EQ(overlap("prefetch(i+1) | dense forward(i)").overlap_us, 5.0);
  EXPECT_DOUBLE_EQ(overlap("prefetch(i+1) | dense backward(i)").overlap_us, 3.0);
  // lookup(1) = prefetch [22, 40] and forward [40, 45] against update(0) [34, 37].
  EXPECT_DOUBLE_EQ(overlap("lookup(i+1) | dense update(i)").overlap_us, 3.0);
  EXPECT_EQ(overlap("embedding forward(i+1) | dense backward(i)").overlapped, 0);
  EXPECT_EQ(overlap("prefetch(i+2) | embedding backward(i)").pairs, 0) << "no third prefetch";
}

// Three steps whose third prefetch runs while the first backward does.
TEST(TraceAnalysisTest, APrefetchTwoStepsOnBesideABackward) {
  ChromeTrace t;
  t.rows = {{1, "ember-cpu"}, {2, "ember-cpu-copy"}};
  auto span = [&](const char* name, uint64_t row, double b, double e) {
    t.spans.push_back({name, row, b, e});
  };
  for (int i = 0; i < 3; ++i) {
    const double at = 10.0 * i;
    span("CachedTbe::Prefetch", 2, at, at + 4);
    span("SigmoidBinaryCrossEntropy", 1, at + 4, at + 5);
    span("EmbeddingBagBackwardSgd", 1, at + 5, at + 25);  // long: into step i+2
  }
  const TraceAnalysis a = AnalyzeTrace(t);
  for (const StageOverlap& o : a.overlaps) {
    if (o.what != "prefetch(i+2) | embedding backward(i)") continue;
    EXPECT_EQ(o.pairs, 1);  // step 0's (step 1 has no prefetch(3))
    EXPECT_EQ(o.overlapped, 1);
    EXPECT_DOUBLE_EQ(o.overlap_us, 4.0);  // prefetch(2) [20, 24] in backward(0) [5, 25]
    return;
  }
  ADD_FAILURE() << "no prefetch(i+2) | embedding backward(i) row";
}

// The comparison table: each run's ratio against the first, and from its
// trace the bound and the share of the traced steps in which a row was busy.
TEST(ComparisonTest, ShowsRatiosBoundsAndTheBusyShare) {
  RunReport base;
  base.schedule = "baseline";
  base.steps.p50_ms = 2.0;
  base.steps.examples_per_second = 1000.0;
  base.trace = AnalyzeTrace(TwoSteps());
  RunReport prefetch = base;
  prefetch.schedule = "prefetch";
  prefetch.steps.examples_per_second = 1500.0;
  const std::string text = FormatComparison({base, prefetch});
  EXPECT_THAT(text, ::testing::HasSubstr("1.50x"));
  EXPECT_THAT(text, ::testing::HasSubstr("0.015"));  // the bound: 15 us a step
  EXPECT_THAT(text, ::testing::HasSubstr("97.8%"));  // busy 45 of the window's 46 us
}

TEST(TraceAnalysisTest, AWarmUpIsLeftOut) {
  const TraceAnalysis a = AnalyzeTrace(TwoSteps(), /*skip_steps=*/1);
  EXPECT_EQ(a.steps, 1);
  EXPECT_DOUBLE_EQ(a.window_us, 34.0);  // from prefetch(1) at 22 to 56
  // ember-cpu from 22: 3+1+1+2+1+1+3+1 (step 0's tail) + 15 (step 1).
  EXPECT_DOUBLE_EQ(a.rows[0].busy_us, 28.0);
  EXPECT_DOUBLE_EQ(a.busy_us_per_step, 33.0);  // [22, 40], [40, 53], [54, 56]
  for (const StageOverlap& o : a.overlaps) EXPECT_EQ(o.pairs, 0) << o.what;  // one step: no pairs
}

TEST(TraceAnalysisTest, ReadsTheEnginesFormatAndPrefersDeviceRows) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("ember_trace_" + std::to_string(::getpid()) + ".json"))
                               .string();
  std::ofstream(path) << R"({"displayTimeUnit":"ns","traceEvents":[
{"ph":"M","name":"thread_name","pid":1,"tid":7,"args":{"name":"ember-gpu0"}},
{"ph":"M","name":"thread_name","pid":1,"tid":1099511627779,"args":{"name":"gpu0 stream 3"}},
{"ph":"X","name":"CachedTbe::Prefetch","cat":"gpu0/Normal","pid":1,"tid":7,"ts":1.000,"dur":2.000},
{"ph":"X","name":"CachedTbe::Prefetch","cat":"gpu","pid":1,"tid":1099511627779,"ts":2.000,"dur":8.000},
{"ph":"X","name":"Trainer::StepEnd","cat":"cpu/Normal","pid":1,"tid":9,"ts":12.000,"dur":1.000}
]}
)";
  const ChromeTrace trace = ReadChromeTrace(path);
  EXPECT_EQ(trace.spans.size(), 3u);
  const TraceAnalysis a = AnalyzeTrace(trace);
  EXPECT_TRUE(a.device_rows);
  ASSERT_EQ(a.rows.size(), 1u);  // the stream; host rows are not device time
  EXPECT_EQ(a.rows[0].row, "gpu0 stream 3");
  EXPECT_DOUBLE_EQ(a.rows[0].busy_us, 8.0);
  std::filesystem::remove(path);
  EXPECT_THAT([&] { (void)ReadChromeTrace(path); },
              ::testing::ThrowsMessage<InvalidArgument>(::testing::HasSubstr("cannot open")));
}

}  // namespace
}  // namespace ember::train::testing
