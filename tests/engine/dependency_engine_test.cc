// The ordering contract of engine.h, on every engine type: conflicting ops run
// in push order, reads between writes run concurrently, duplicate and
// read-write var lists are normalized, versions count finished writes.

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/error.h"
#include "tests/engine/engine_cases.h"

namespace ember::engine::testing {
namespace {

using std::chrono::milliseconds;

using DependencyEngineTest = EngineTest;

// Waits (bounded) until `count` reaches `target`; true if it did.
bool AwaitCount(const std::atomic<int>& count, int target, milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (count.load() < target) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

TEST_P(DependencyEngineTest, ConflictingOpsRunInPushOrder) {
  VarHandle v = engine().NewVariable();
  std::vector<int> order;  // guarded by the engine: every op writes v
  for (int i = 0; i < 500; ++i) {
    engine().PushSync([&order, i](RunContext) { order.push_back(i); }, {}, {v});
  }
  engine().WaitForVar(v);
  ASSERT_EQ(order.size(), 500u);
  for (int i = 0; i < 500; ++i) ASSERT_EQ(order[i], i);
}

// A push from a second thread while another thread's op holds its var: the
// op runs after the holder, and on NaiveEngine the push returns only once
// its op has run (it used to return at once, leaving the op a pointer into
// the finished push's frame).
TEST_P(DependencyEngineTest, PushFromAnotherThreadWaitsForTheHolder) {
  VarHandle v = engine().NewVariable();
  std::atomic<bool> release{false};
  std::atomic<int> holding{0};
  std::vector<int> order;  // guarded by the engine: both ops write v
  std::thread holder([&] {
    engine().PushSync(
        [&](RunContext) {
          ++holding;
          while (!release.load()) std::this_thread::yield();
          order.push_back(1);
        },
        {}, {v});
  });
  ASSERT_TRUE(AwaitCount(holding, 1, milliseconds(5000)));
  std::atomic<bool> ran{false};
  std::atomic<bool> pushed{false};
  std::thread second([&] {
    engine().PushSync(
        [&](RunContext) {
          order.push_back(2);
          ran = true;
        },
        {}, {v});
    if (is_naive()) {
      EXPECT_TRUE(ran.load()) << "a NaiveEngine push returned before its op ran";
    }
    pushed = true;
  });
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_FALSE(ran.load()) << "the second write ran while the first held the var";
  release = true;
  holder.join();
  second.join();
  engine().WaitForAll();
  EXPECT_TRUE(pushed.load());
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

TEST_P(DependencyEngineTest, ReadsBetweenWritesRunConcurrently) {
  if (is_naive() || GetParam().workers < 2) GTEST_SKIP() << "needs two workers";
  VarHandle v = engine().NewVariable();
  std::atomic<int> inside{0};
  std::atomic<int> overlapped{0};
  for (int i = 0; i < 2; ++i) {
    engine().PushSync(
        [&](RunContext) {
          ++inside;
          if (AwaitCount(inside, 2, milliseconds(5000))) ++overlapped;
        },
        {v}, {});
  }
  engine().WaitForAll();
  EXPECT_EQ(overlapped.load(), 2) << "two reads of one var did not run at the same time";
}

TEST_P(DependencyEngineTest, WritesExcludeReadsAndWrites) {
  VarHandle v = engine().NewVariable();
  std::atomic<int> readers{0};
  std::atomic<int> writers{0};
  std::atomic<int> violations{0};
  for (int i = 0; i < 2000; ++i) {
    if (i % 3 == 0) {
      engine().PushSync(
          [&](RunContext) {
            if (writers.fetch_add(1) != 0 || readers.load() != 0) ++violations;
            std::this_thread::yield();
            writers.fetch_sub(1);
          },
          {}, {v});
    } else {
      engine().PushSync(
          [&](RunContext) {
            readers.fetch_add(1);
            if (writers.load() != 0) ++violations;
            std::this_thread::yield();
            readers.fetch_sub(1);
          },
          {v}, {});
    }
  }
  engine().WaitForAll();
  EXPECT_EQ(violations.load(), 0);
}

TEST_P(DependencyEngineTest, VersionCountsFinishedWrites) {
  VarHandle v = engine().NewVariable();
  EXPECT_EQ(engine().VarVersion(v), 0u);
  for (int i = 0; i < 100; ++i) engine().PushSync([](RunContext) {}, {}, {v});
  for (int i = 0; i < 50; ++i) engine().PushSync([](RunContext) {}, {v}, {});
  engine().WaitForVar(v);
  EXPECT_EQ(engine().VarVersion(v), 100u);
}

TEST_P(DependencyEngineTest, DuplicateVarsAreNormalized) {
  VarHandle a = engine().NewVariable();
  VarHandle b = engine().NewVariable();
  int runs = 0;
  engine().PushSync([&](RunContext) { ++runs; }, {a, a, b}, {b, b});
  engine().WaitForAll();
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(engine().VarVersion(a), 0u) << "a read twice is still a read";
  EXPECT_EQ(engine().VarVersion(b), 1u) << "read and written: a write wins";
}

TEST_P(DependencyEngineTest, ReadWriteVarOrdersLikeAWrite) {
  VarHandle v = engine().NewVariable();
  std::vector<std::string> order;
  std::mutex mu;
  auto record = [&](const char* what) {
    std::lock_guard<std::mutex> lock(mu);
    order.emplace_back(what);
  };
  engine().PushSync(
      [&](RunContext) { std::this_thread::sleep_for(milliseconds(20)), record("read1"); }, {v}, {});
  engine().PushSync([&](RunContext) { record("read-write"); }, {v}, {v});
  engine().PushSync([&](RunContext) { record("read2"); }, {v}, {});
  engine().WaitForAll();
  EXPECT_EQ(order, (std::vector<std::string>{"read1", "read-write", "read2"}));
}

TEST_P(DependencyEngineTest, PreBuiltOperatorRunsOncePerPush) {
  VarHandle v = engine().NewVariable();
  int count = 0;
  OprHandle op = engine().NewOperator(
      [&count](RunContext, const OnStart& start, const OnComplete& done) {
        start();
        ++count;
        done();
      },
      {}, {v}, {.name = "increment"});
  for (int i = 0; i < 100; ++i) engine().Push(op, Context::CPU());
  engine().DeleteOperator(op);  // pushes already made still run
  engine().WaitForVar(v);
  EXPECT_EQ(count, 100);
  EXPECT_EQ(engine().VarVersion(v), 100u);
}

// NewOperator's attrs give the op's property and name only; each Push names
// the context and priority of its run (engine.h).
TEST_P(DependencyEngineTest, PushNamesTheContextOfItsRunNotNewOperator) {
  VarHandle v = engine().NewVariable();
  std::vector<Context> ran_on;  // guarded by the engine: the op writes v
  const Context absent_gpu = Context::GPU(1 << 20);
  OprHandle op = engine().NewOperator(
      [&ran_on](RunContext rc, const OnStart& start, const OnComplete& done) {
        start();
        ran_on.push_back(rc.ctx);
        done();
      },
      {}, {v}, {.ctx = absent_gpu, .priority = 5, .name = "anywhere"});
  engine().Push(op, Context::CPU());
  EXPECT_THROW(engine().Push(op, absent_gpu), Unavailable);
  engine().DeleteOperator(op);
  engine().WaitForVar(v);
  EXPECT_EQ(ran_on, (std::vector<Context>{Context::CPU()}));
}

TEST_P(DependencyEngineTest, DeleteVariableRunsAfterPendingOps) {
  VarHandle v = engine().NewVariable();
  std::atomic<int> done{0};
  for (int i = 0; i < 20; ++i) {
    engine().PushSync([&](RunContext) { std::this_thread::sleep_for(milliseconds(1)), ++done; },
                      {v}, {});
  }
  int seen_at_delete = -1;
  engine().DeleteVariable(v, [&](RunContext) { seen_at_delete = done.load(); });
  engine().WaitForAll();
  EXPECT_EQ(seen_at_delete, 20);
}

TEST_P(DependencyEngineTest, OpsMayPushOps) {
  VarHandle v = engine().NewVariable();
  std::vector<int> order;
  engine().PushSync(
      [&](RunContext) {
        order.push_back(1);
        engine().PushSync([&](RunContext) { order.push_back(2); }, {}, {v});
      },
      {}, {v});
  engine().WaitForAll();
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

TEST_P(DependencyEngineTest, AsyncOpCompletesFromAnotherThread) {
  VarHandle v = engine().NewVariable();
  int value = 0;
  std::thread helper;
  engine().PushAsync(
      [&](RunContext, const OnStart& start, const OnComplete& done) {
        start();
        helper = std::thread([&value, done] {
          std::this_thread::sleep_for(milliseconds(10));
          value = 42;
          done();
        });
      },
      {}, {v}, {.prop = FnProperty::kAsync, .name = "async"});
  int seen = 0;
  engine().PushSync([&](RunContext) { seen = value; }, {v}, {});
  engine().WaitForAll();
  helper.join();
  EXPECT_EQ(seen, 42);
}

TEST_P(DependencyEngineTest, WaitForAllWaitsForEveryOp) {
  std::atomic<int> done{0};
  for (int i = 0; i < 100; ++i) {
    VarHandle v = engine().NewVariable();
    engine().PushSync(
        [&](RunContext) { std::this_thread::sleep_for(std::chrono::microseconds(100)), ++done; },
        {}, {v});
  }
  engine().WaitForAll();
  EXPECT_EQ(done.load(), 100);
}

INSTANTIATE_TEST_SUITE_P(AllEngines, DependencyEngineTest, ::testing::ValuesIn(AllEngineCases()),
                         CaseName);
INSTANTIATE_TEST_SUITE_P(AsyncEngines, DependencyEngineTest,
                         ::testing::ValuesIn(AsyncEngineCases()), CaseName);

}  // namespace
}  // namespace ember::engine::testing
