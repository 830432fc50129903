// Worker pools, through the engine's API: the priority pool runs the highest
// priority first, a continuation chain yields to queued ops, and idle
// workers sleep.

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/base/mutex.h"
#include "engine/engine.h"

namespace ember::engine {
namespace {

// User and system CPU time of this process so far.
double ProcessCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return double(t.tv_sec) + 1e-6 * double(t.tv_usec); };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

TEST(IdleEngineTest, IdleWorkersSleep) {
  for (EngineType type : {EngineType::kThreaded, EngineType::kThreadedPerDevice}) {
    EngineOptions options;
    options.type = type;
    auto engine = CreateEngine(options);
    for (int i = 0; i < 1000; ++i) engine->PushSync([](RunContext) {}, {}, {});
    engine->WaitForAll();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // past every spin window
    // Issue 10's target: under 1% of a core. Measured 0.003-0.006% here,
    // 0.05% under TSan (its own background thread counts too).
    const double before = ProcessCpuSeconds();
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const double used = ProcessCpuSeconds() - before;
    EXPECT_LT(used, 0.01) << ToString(type) << " used " << used << " s of CPU in 1 s idle";
  }
}

TEST(PriorityPoolTest, PrioritizedOpsRunHighestFirst) {
  EngineOptions options;
  options.cpu_priority_workers = 1;
  auto engine = CreateEngine(options);
  ember::Notification release;
  VarHandle gate = engine->NewVariable();
  // Occupy the single priority worker, then queue ops of mixed priorities.
  engine->PushSync([&](RunContext) { release.WaitForNotification(); }, {}, {gate},
                   {.prop = FnProperty::kCPUPrioritized, .priority = 100});
  std::vector<int> order;  // only the single priority worker appends
  for (int p : {1, 7, 3, 7, -2}) {
    VarHandle own = engine->NewVariable();
    engine->PushSync([&order, p](RunContext) { order.push_back(p); }, {}, {own},
                     {.prop = FnProperty::kCPUPrioritized, .priority = p});
  }
  release.Notify();
  engine->WaitForAll();
  EXPECT_EQ(order, (std::vector<int>{7, 7, 3, 1, -2}));
}

TEST(WorkerPoolTest, ContinuationChainYieldsToQueuedOps) {
  EngineOptions options;
  options.type = EngineType::kThreaded;
  options.pool_workers = 1;
  auto engine = CreateEngine(options);
  ember::Notification release;
  VarHandle chain = engine->NewVariable();
  engine->PushSync([&](RunContext) { release.WaitForNotification(); }, {}, {chain},
                   {.name = "gate"});
  std::vector<int> order;  // only the single worker appends
  constexpr int kChain = 500;
  for (int i = 0; i < kChain; ++i) {
    engine->PushSync([&order, i](RunContext) { order.push_back(i); }, {}, {chain});
  }
  VarHandle other = engine->NewVariable();
  engine->PushSync([&order](RunContext) { order.push_back(-1); }, {}, {other}, {.name = "queued"});
  release.Notify();
  engine->WaitForAll();
  ASSERT_EQ(order.size(), size_t{kChain} + 1);
  const auto queued = std::find(order.begin(), order.end(), -1) - order.begin();
  EXPECT_LE(queued, 65) << "the queued op waited for the whole chain";
  EXPECT_GE(queued, 1) << "the chain's first op is the gate's continuation";
}

}  // namespace
}  // namespace ember::engine
