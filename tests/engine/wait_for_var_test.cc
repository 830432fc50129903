// WaitForVar waits for the writes pushed before it and for nothing else
// (engine.h): not for a free worker, not for reads, not for later writes. So
// a running op may wait for a signal that the caller sends after WaitForVar.
//
// Ops that block are pushed from helper threads: under NaiveEngine an op
// runs on the thread that pushes it, and the caller must stay free.

#include <atomic>
#include <chrono>
#include <functional>
#include <latch>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/error.h"
#include "tests/engine/engine_cases.h"

namespace ember::engine::testing {
namespace {

using std::chrono::milliseconds;

// Polls `flag` for up to `limit`; true once it is set.
bool AwaitFlag(const std::atomic<bool>& flag, milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!flag.load()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return true;
}

// A gate that ops wait on, opened by the test, or at the latest by a
// watchdog after `kGateLimit`, so that a WaitForVar that wrongly waits for
// a blocked op fails the test instead of hanging it. It outlives its
// waiters: an op counted in `started` may be descheduled before it reaches
// the latch while the test ends, so the destructor waits for every waiter
// to leave (a gate destroyed under a waiter hung or crashed the test on a
// loaded machine).
class Gate {
 public:
  Gate() : watchdog_([this] { Watch(); }) {}
  ~Gate() {
    Open();
    watchdog_.join();
    while (waiters_.load() > 0) std::this_thread::yield();
  }
  void Open() {
    if (!opened_.exchange(true)) latch_.count_down();
  }
  // Counts the caller as a waiter before it signals `started`, so that
  // whoever saw `started` cannot destroy the gate under it.
  void Wait(std::atomic<int>* started) {
    ++waiters_;
    ++*started;
    latch_.wait();
    --waiters_;
  }
  // True if the watchdog had to open it.
  [[nodiscard]] bool timed_out() const { return timed_out_.load(); }

 private:
  static constexpr milliseconds kGateLimit{5000};
  void Watch() {
    const auto deadline = std::chrono::steady_clock::now() + kGateLimit;
    while (!opened_.load() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(2));
    }
    if (!opened_.load()) timed_out_ = true;
    Open();
  }

  std::latch latch_{1};
  std::atomic<bool> opened_{false};
  std::atomic<bool> timed_out_{false};
  std::atomic<int> waiters_{0};
  std::thread watchdog_;
};

class WaitForVarTest : public EngineTest {
 protected:
  ~WaitForVarTest() override {
    for (std::thread& pusher : pushers_) pusher.join();
  }

  // Pushes, from a thread of its own, an op on `reads`/`writes` that
  // signals `started`, waits for `gate` and then runs `then`.
  void PushBlocking(VarList reads, VarList writes, Gate* gate, std::atomic<int>* started,
                    std::function<void()> then = {}) {
    std::vector<VarHandle> r(reads.span().begin(), reads.span().end());
    std::vector<VarHandle> w(writes.span().begin(), writes.span().end());
    pushers_.emplace_back([=, this] {
      engine().PushSync(
          [=](RunContext) {
            gate->Wait(started);
            if (then) then();
          },
          r, w, {.name = "blocking"});
    });
  }

  // Occupies every worker that would run a normal CPU op: the shared pool
  // (ThreadedEngine), the normal CPU pool (ThreadedEnginePerDevice), or
  // the one pushing thread (NaiveEngine).
  void BlockEveryWorker(Gate* gate) {
    const int workers = is_naive() ? 1 : GetParam().workers;
    std::atomic<int> started{0};
    for (int i = 0; i < workers; ++i) {
      PushBlocking({}, {engine().NewVariable()}, gate, &started);
    }
    while (started.load() < workers) std::this_thread::sleep_for(milliseconds(1));
  }

 private:
  std::vector<std::thread> pushers_;
};

TEST_P(WaitForVarTest, ReturnsAtOnceWithEveryWorkerBusy) {
  Gate gate;
  BlockEveryWorker(&gate);
  engine().WaitForVar(engine().NewVariable());  // the gate opens only after
  EXPECT_FALSE(gate.timed_out()) << "WaitForVar on an unwritten var waited for a worker";
  gate.Open();
  engine().WaitForAll();
}

TEST_P(WaitForVarTest, ReturnsAtOnceAfterTheLastWriteFinished) {
  VarHandle v = engine().NewVariable();
  int value = 0;
  engine().PushSync([&](RunContext) { value = 7; }, {}, {v});
  engine().WaitForVar(v);
  Gate gate;
  BlockEveryWorker(&gate);
  engine().WaitForVar(v);  // the write is done: nothing to wait for
  EXPECT_FALSE(gate.timed_out());
  EXPECT_EQ(value, 7);
  gate.Open();
}

TEST_P(WaitForVarTest, DoesNotWaitForPendingReads) {
  VarHandle v = engine().NewVariable();
  Gate gate;
  std::atomic<int> started{0};
  PushBlocking({v}, {engine().NewVariable()}, &gate, &started);
  while (started.load() < 1) std::this_thread::sleep_for(milliseconds(1));
  engine().WaitForVar(v);  // a read holds v; the gate opens only after
  EXPECT_FALSE(gate.timed_out()) << "WaitForVar waited for a read";
  gate.Open();
}

TEST_P(WaitForVarTest, WaitsForEarlierWritesButNotLaterOnes) {
  VarHandle v = engine().NewVariable();
  std::atomic<int> value{0};
  Gate first;
  Gate second;
  std::atomic<int> started{0};
  PushBlocking({}, {v}, &first, &started, [&] { value = 1; });
  while (started.load() < 1) std::this_thread::sleep_for(milliseconds(1));

  std::atomic<bool> returned{false};
  std::atomic<int> seen{-1};
  std::thread waiter([&] {
    engine().WaitForVar(v);
    seen = value.load();
    returned = true;
  });
  // The waiter registers at once (nothing can block it before); the second
  // write must come after that. Should the waiter be slower than this sleep,
  // the test fails (it would then wait for the second write): a false
  // failure is possible on a very slow machine, a false pass is not.
  std::this_thread::sleep_for(milliseconds(200));
  std::atomic<int> second_started{0};
  PushBlocking({}, {v}, &second, &second_started, [&] { value = 2; });
  EXPECT_FALSE(AwaitFlag(returned, milliseconds(50))) << "returned before the earlier write";
  first.Open();
  EXPECT_TRUE(AwaitFlag(returned, milliseconds(4000)))
      << "WaitForVar waited for a write pushed after it";
  EXPECT_FALSE(second.timed_out());
  second.Open();
  waiter.join();
  EXPECT_EQ(seen.load(), 1);
  engine().WaitForAll();
  EXPECT_EQ(value.load(), 2);
}

TEST_P(WaitForVarTest, ManyWaitersOnManyVarsAllWake) {
  constexpr int kVars = 16;
  std::vector<VarHandle> vars;
  for (int i = 0; i < kVars; ++i) vars.push_back(engine().NewVariable());
  std::vector<std::atomic<int>> values(kVars);
  for (int round = 1; round <= 50; ++round) {
    for (int i = 0; i < kVars; ++i) {
      engine().PushSync([&values, i, round](RunContext) { values[i] = round; }, {}, {vars[i]});
    }
    std::vector<std::thread> waiters;
    for (int i = 0; i < kVars; ++i) {
      waiters.emplace_back([&, i, round] {
        engine().WaitForVar(vars[i]);
        EXPECT_EQ(values[i].load(), round);
      });
    }
    for (std::thread& waiter : waiters) waiter.join();
  }
}

TEST_P(WaitForVarTest, StaleHandleIsRefused) {
  VarHandle v = engine().NewVariable();
  engine().DeleteVariable(v);
  EXPECT_THROW(engine().WaitForVar(v), InvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(AllEngines, WaitForVarTest, ::testing::ValuesIn(AllEngineCases()),
                         CaseName);
INSTANTIATE_TEST_SUITE_P(AsyncEngines, WaitForVarTest, ::testing::ValuesIn(AsyncEngineCases()),
                         CaseName);

}  // namespace
}  // namespace ember::engine::testing
