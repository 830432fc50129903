// The in-flight bound: a pushing thread blocks while max_in_flight ops are
// pending; pushes from engine workers and from inside ops never block.
// Pacing (pace_in_flight): a pusher past it waits for the backlog to drain,
// but never for a backlog that cannot drain, and changes no result.

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/base/mutex.h"
#include "engine/error.h"
#include "engine/testing/random_workload.h"
#include "tests/engine/engine_cases.h"

namespace ember::engine::testing {
namespace {

class InFlightBoundTest : public ::testing::TestWithParam<EngineCase> {
 protected:
  void SetUp() override {
    if (GetParam().type == EngineType::kNaive) GTEST_SKIP() << "NaiveEngine runs each push at once";
    EngineOptions options = OptionsFor(GetParam());
    options.max_in_flight = kBound;
    engine_ = CreateEngine(options);
  }

  // Pushes an op on `v` that holds it until `release` is notified.
  void PushBlocker(VarHandle v, Notification* release) {
    engine_->PushSync([release](RunContext) { release->WaitForNotification(); }, {}, {v},
                      {.name = "blocker"});
  }

  static constexpr int kBound = 8;
  std::unique_ptr<Engine> engine_;
};

TEST_P(InFlightBoundTest, PusherBlocksPastTheBound) {
  VarHandle v = engine_->NewVariable();
  Notification release;
  PushBlocker(v, &release);
  std::atomic<int> pushed{0};
  std::atomic<int> ran{0};
  std::thread pusher([&] {
    for (int i = 0; i < 50; ++i) {
      engine_->PushSync([&ran](RunContext) { ++ran; }, {}, {v});
      ++pushed;
    }
  });
  // The blocker and the pusher's first kBound - 1 ops fill the bound; the
  // next push must block until the blocker is released.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (pushed.load() < kBound - 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(pushed.load(), kBound - 1) << "pushes blocked below the bound";
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(pushed.load(), kBound - 1) << "pushes went past the in-flight bound";
  release.Notify();
  pusher.join();
  engine_->WaitForAll();
  EXPECT_EQ(ran.load(), 50);
}

TEST_P(InFlightBoundTest, PushesFromInsideOpsNeverBlock) {
  VarHandle v = engine_->NewVariable();
  std::atomic<int> ran{0};
  // Every inner op writes v, which the fan-out op holds: all stay pending
  // until it returns, far past the bound.
  engine_->PushSync(
      [&](RunContext) {
        for (int i = 0; i < 10 * kBound; ++i) {
          engine_->PushSync([&ran](RunContext) { ++ran; }, {}, {v});
        }
      },
      {}, {v}, {.name = "fan-out"});
  engine_->WaitForAll();
  EXPECT_EQ(ran.load(), 10 * kBound);
}

// Pacing must not wait for a backlog that waits for the pusher: the only
// CPU worker holds v until all 2,000 ops behind it have been pushed.
TEST_P(InFlightBoundTest, PacedPusherGoesOnWhenNothingFinishes) {
  EngineOptions options = OptionsFor(GetParam());
  options.pace_in_flight = 4;
  engine_ = CreateEngine(options);
  VarHandle v = engine_->NewVariable();
  Notification release;
  PushBlocker(v, &release);
  constexpr int kOps = 2000;
  std::vector<int> order;
  for (int i = 0; i < kOps; ++i) {
    engine_->PushSync([&order, i](RunContext) { order.push_back(i); }, {}, {v});
  }
  release.Notify();
  engine_->WaitForAll();
  ASSERT_EQ(order.size(), kOps);
  for (int i = 0; i < kOps; ++i) ASSERT_EQ(order[i], i);
}

// A paced pusher of the random DAG (reads and writes over 50 vars, every op
// tiny) gets exactly the serial result, with pacing on at every few ops.
TEST_P(InFlightBoundTest, PacedRandomDagMatchesSerialRun) {
  for (const int pace : {1, 3, 64}) {
    EngineOptions options = OptionsFor(GetParam());
    options.pace_in_flight = pace;
    engine_ = CreateEngine(options);
    WorkloadSpec spec;
    spec.num_ops = 20000;
    spec.num_vars = 50;
    spec.seed = 100 + pace;
    const Workload workload = MakeRandomWorkload(spec);
    EXPECT_EQ(RunOnEngine(*engine_, workload), RunSerial(workload)) << "pace " << pace;
  }
}

TEST(InFlightOptionsTest, NegativePaceIsRefused) {
  EngineOptions options;
  options.pace_in_flight = -1;
  try {
    (void)CreateEngine(options);
    FAIL() << "no exception";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("pace_in_flight = -1 must be at least 0"),
              std::string::npos)
        << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(AllEngines, InFlightBoundTest, ::testing::ValuesIn(AllEngineCases()),
                         CaseName);

}  // namespace
}  // namespace ember::engine::testing
