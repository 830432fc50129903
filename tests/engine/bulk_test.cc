// Bulk execution of PushSync: consecutive sync ops of one thread merge into
// one engine op, with the same results and error semantics.

#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/engine/engine_cases.h"

namespace ember::engine::testing {
namespace {

using BulkTest = EngineTest;

TEST_P(BulkTest, SetBulkSizeReturnsThePreviousSize) {
  EXPECT_EQ(engine().SetBulkSize(16), 0);
  EXPECT_EQ(engine().SetBulkSize(4), 16);
  EXPECT_EQ(engine().SetBulkSize(0), 4);
}

TEST_P(BulkTest, BulkedOpsRunInOrderAsFewerEngineOps) {
  VarHandle v = engine().NewVariable();
  engine().SetBulkSize(16);
  std::vector<int> order;
  for (int i = 0; i < 64; ++i)
    engine().PushSync([&order, i](RunContext) { order.push_back(i); }, {}, {v});
  engine().WaitForVar(v);
  engine().SetBulkSize(0);
  ASSERT_EQ(order.size(), 64u);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(order[i], i);
  // NaiveEngine never bulks: each of its pushes has run when it returns.
  EXPECT_EQ(engine().VarVersion(v), is_naive() ? 64u : 4u) << "64 ops in bulks of 16";
}

// MXNet's NaiveEngine ignores the bulk size: a PushSync must still have run
// when it returns, so that a serial reference stays serial.
TEST_P(BulkTest, NaiveEnginePushSyncHasRunWhenItReturns) {
  if (!is_naive()) GTEST_SKIP() << "only NaiveEngine promises that a push has run on return";
  VarHandle v = engine().NewVariable();
  engine().SetBulkSize(4);
  int x = 0;
  engine().PushSync([&x](RunContext) { x = 1; }, {}, {v});
  EXPECT_EQ(x, 1);
  engine().SetBulkSize(0);
}

TEST_P(BulkTest, BulkOfDependentOpsMatchesSerial) {
  std::vector<VarHandle> vars(8);
  std::vector<uint64_t> data(8, 1), expected(8, 1);  // wraps, never overflows
  for (VarHandle& var : vars) var = engine().NewVariable();
  engine().SetBulkSize(7);
  for (int i = 0; i < 500; ++i) {
    const int in = (i * 5) % 8, out = (i * 3 + 1) % 8;
    expected[out] = expected[out] * 3 + expected[in] + i;
    engine().PushSync([&data, in, out, i](RunContext) { data[out] = data[out] * 3 + data[in] + i; },
                      {vars[in]}, {vars[out]});
  }
  engine().WaitForAll();
  engine().SetBulkSize(0);
  EXPECT_EQ(data, expected);
}

TEST_P(BulkTest, FirstThrowingOpFailsTheBulk) {
  VarHandle v = engine().NewVariable();
  engine().SetBulkSize(4);
  int ran = 0;
  engine().PushSync([&](RunContext) { ++ran; }, {}, {v});
  engine().PushSync([](RunContext) { throw std::runtime_error("second"); }, {}, {v});
  engine().PushSync([&](RunContext) { ++ran; }, {}, {v});
  EXPECT_THROW(engine().WaitForVar(v), std::runtime_error);
  engine().SetBulkSize(0);
  EXPECT_EQ(ran, 1);
}

TEST_P(BulkTest, ThreadExitFlushesItsBulk) {
  VarHandle v = engine().NewVariable();
  int ran = 0;
  std::thread pusher([&] {
    engine().SetBulkSize(16);
    for (int i = 0; i < 3; ++i) engine().PushSync([&ran](RunContext) { ++ran; }, {}, {v});
  });
  pusher.join();
  engine().WaitForAll();
  EXPECT_EQ(ran, 3);
}

// A thread that pushed before it opened its bulk made its block cache
// after the bulk, so at exit the cache is gone before the bulk flushes; the
// flush, queued behind a busy var, still finds memory for the var's queue
// (and ASan sees nothing used after it was freed, nor leaked).
TEST_P(BulkTest, ThreadExitFlushesItsBulkAfterItsBlockCacheIsGone) {
  VarHandle v = engine().NewVariable();
  VarHandle w = engine().NewVariable();
  std::atomic<bool> release{false};
  // v stays written until the pusher has gone (not in NaiveEngine, whose
  // push would wait for that write to finish).
  const bool hold_v = GetParam().type != EngineType::kNaive;
  if (hold_v) {
    engine().PushAsync(
        [&release](RunContext, const OnStart& on_start, const OnComplete& on_complete) {
          on_start();
          std::thread([&release, on_complete] {
            while (!release.load()) std::this_thread::yield();
            on_complete();
          }).detach();
        },
        {}, {v});
  }
  int ran = 0;
  std::thread pusher([&] {
    engine().PushAsync(
        [](RunContext, const OnStart& on_start, const OnComplete& on_complete) {
          on_start();
          on_complete();
        },
        {}, {w});
    engine().SetBulkSize(16);
    for (int i = 0; i < 3; ++i) engine().PushSync([&ran](RunContext) { ++ran; }, {v}, {});
  });
  pusher.join();
  release = true;
  engine().WaitForAll();
  EXPECT_EQ(ran, 3);
}

// The flush at thread exit runs in a thread_local's destructor: a push
// that fails there (its var deleted meanwhile by another thread) is logged
// and dropped, not thrown (which would terminate the process).
TEST_P(BulkTest, AFailedFlushAtThreadExitDoesNotTerminate) {
  if (is_naive()) GTEST_SKIP() << "NaiveEngine never bulks: its push runs at once";
  VarHandle v = engine().NewVariable();
  std::atomic<bool> bulked{false};
  std::atomic<bool> deleted{false};
  int ran = 0;
  std::thread pusher([&] {
    engine().SetBulkSize(16);
    engine().PushSync([&ran](RunContext) { ++ran; }, {}, {v});  // stays in the open bulk
    bulked = true;
    while (!deleted.load()) std::this_thread::yield();
  });  // exits with the bulk open, its var gone
  while (!bulked.load()) std::this_thread::yield();
  engine().DeleteVariable(v);
  deleted = true;
  pusher.join();
  engine().WaitForAll();
  EXPECT_EQ(ran, 0) << "the bulk of a deleted var was pushed";
}

INSTANTIATE_TEST_SUITE_P(AllEngines, BulkTest, ::testing::ValuesIn(AllEngineCases()), CaseName);

}  // namespace
}  // namespace ember::engine::testing
