// Errors travel like data: a failed op marks what it writes, ops that touch a
// failed var are skipped (unless kNoSkip) and pass the error on, the first
// wait that sees an error reports it (and then it poisons nothing), no error
// is lost, and the engine keeps working afterwards.

#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/error.h"

#include "tests/engine/engine_cases.h"

namespace ember::engine::testing {
namespace {

using ErrorPropagationTest = EngineTest;

struct OpFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void PushFailing(Engine& engine, VarHandle out, const std::string& message) {
  engine.PushSync([message](RunContext) { throw OpFailure(message); }, {}, {out},
                  {.name = "failing"});
}

// Expects `call` to throw OpFailure with `message`.
template <typename Fn>
void ExpectOpFailure(Fn&& call, const std::string& message) {
  try {
    call();
    ADD_FAILURE() << "expected OpFailure(\"" << message << "\")";
  } catch (const OpFailure& e) {
    EXPECT_EQ(std::string(e.what()), message);
  }
}

// The message of the exception `error` holds.
std::string MessageOf(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  }
}

TEST_P(ErrorPropagationTest, WaitForVarRethrowsOnce) {
  VarHandle v = engine().NewVariable();
  PushFailing(engine(), v, "boom");
  ExpectOpFailure([&] { engine().WaitForVar(v); }, "boom");
  EXPECT_NO_THROW(engine().WaitForVar(v));
  EXPECT_NO_THROW(engine().WaitForAll()) << "the error was already reported";
}

TEST_P(ErrorPropagationTest, ErrorTravelsDownAChainAndSkipsOps) {
  VarHandle a = engine().NewVariable();
  VarHandle b = engine().NewVariable();
  VarHandle c = engine().NewVariable();
  int ran = 0;
  PushFailing(engine(), a, "root cause");
  engine().PushSync([&](RunContext) { ++ran; }, {a}, {b});
  engine().PushSync([&](RunContext) { ++ran; }, {b}, {c});
  ExpectOpFailure([&] { engine().WaitForVar(c); }, "root cause");
  EXPECT_EQ(ran, 0) << "ops reading a failed var must be skipped";
}

TEST_P(ErrorPropagationTest, NoSkipOpsRunAndStillPassTheErrorOn) {
  VarHandle a = engine().NewVariable();
  VarHandle b = engine().NewVariable();
  VarHandle c = engine().NewVariable();
  int ran = 0;
  std::atomic<int> told_failed{0};
  PushFailing(engine(), a, "bad input");
  engine().PushSync(
      [&](RunContext ctx) {
        ++ran;
        told_failed += ctx.input_failed ? 1 : 0;
      },
      {a}, {b}, {.prop = FnProperty::kNoSkip});
  ExpectOpFailure([&] { engine().WaitForVar(b); }, "bad input");
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(told_failed.load(), 1) << "a kNoSkip op is told that its input failed";
  // With clean inputs it is told nothing.
  engine().PushSync([&](RunContext ctx) { told_failed += ctx.input_failed ? 1 : 0; }, {}, {c},
                    {.prop = FnProperty::kNoSkip});
  engine().WaitForVar(c);
  EXPECT_EQ(told_failed.load(), 1);
  engine().DeleteVariable(c);
}

TEST_P(ErrorPropagationTest, AsyncOpReportsErrorThroughOnComplete) {
  VarHandle v = engine().NewVariable();
  engine().PushAsync(
      [](RunContext, const OnStart& start, const OnComplete& done) {
        start();
        done(std::make_exception_ptr(OpFailure("reported")));
      },
      {}, {v});
  ExpectOpFailure([&] { engine().WaitForVar(v); }, "reported");
}

TEST_P(ErrorPropagationTest, WaitForAllRethrowsTheFirstError) {
  VarHandle a = engine().NewVariable();
  VarHandle b = engine().NewVariable();
  PushFailing(engine(), a, "first");
  engine().PushSync([](RunContext) {}, {a}, {a});  // touches a: skipped, no new error
  engine().PushSync([](RunContext) {}, {}, {b});
  ExpectOpFailure([&] { engine().WaitForAll(); }, "first");
  EXPECT_NO_THROW(engine().WaitForAll()) << "reported once";
}

TEST_P(ErrorPropagationTest, WaitForAllReportsEveryUnreportedErrorTogether) {
  VarHandle a = engine().NewVariable();
  VarHandle b = engine().NewVariable();
  VarHandle c = engine().NewVariable();
  PushFailing(engine(), a, "one");
  // Fails on its own although it reads a failed var (kNoSkip runs it).
  engine().PushSync([](RunContext) { throw OpFailure("two"); }, {a}, {b},
                    {.prop = FnProperty::kNoSkip, .name = "second"});
  engine().PushSync([](RunContext) { throw OpFailure("three"); }, {b}, {c},
                    {.prop = FnProperty::kNoSkip, .name = "third"});
  try {
    engine().WaitForAll();
    ADD_FAILURE() << "expected OpErrors";
  } catch (const OpErrors& e) {
    ASSERT_EQ(e.errors().size(), 3u);
    EXPECT_EQ(MessageOf(e.errors()[0]), "one");
    EXPECT_EQ(MessageOf(e.errors()[1]), "two");
    EXPECT_EQ(MessageOf(e.errors()[2]), "three");
    EXPECT_EQ(e.op_names(), (std::vector<std::string>{"failing", "second", "third"}));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("[Engine::WaitForAll] 3 ops failed"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("op 'third': three"));
  }
  EXPECT_NO_THROW(engine().WaitForAll()) << "reported once";
  EXPECT_NO_THROW(engine().WaitForVar(c));
}

// The lost error: A's error is reported through WaitForVar; B's,
// never reported, must still reach the next WaitForAll.
TEST_P(ErrorPropagationTest, AnErrorReportedByWaitForVarLeavesTheOthersToWaitForAll) {
  VarHandle a = engine().NewVariable();
  VarHandle b = engine().NewVariable();
  PushFailing(engine(), a, "A");
  PushFailing(engine(), b, "B");
  ExpectOpFailure([&] { engine().WaitForVar(a); }, "A");
  ExpectOpFailure([&] { engine().WaitForAll(); }, "B");
  EXPECT_NO_THROW(engine().WaitForAll());
}

TEST_P(ErrorPropagationTest, AReportedErrorPoisonsNothing) {
  VarHandle v = engine().NewVariable();
  VarHandle out = engine().NewVariable();
  PushFailing(engine(), v, "reported");
  ExpectOpFailure([&] { engine().WaitForAll(); }, "reported");
  EXPECT_NO_THROW(engine().WaitForVar(v)) << "WaitForAll reported it";
  EXPECT_NO_THROW(engine().Throw(v));
  int ran = 0;
  engine().PushSync([&](RunContext) { ++ran; }, {v}, {out});
  engine().PushSync([&](RunContext) { ++ran; }, {}, {v});
  EXPECT_NO_THROW(engine().WaitForVar(out));
  EXPECT_NO_THROW(engine().WaitForAll());
  EXPECT_EQ(ran, 2) << "ops on a var whose error was reported must run";
}

// One report clears the error wherever it travelled: here WaitForVar on a
// var it reached through a skipped op.
TEST_P(ErrorPropagationTest, AReportClearsTheErrorOnEveryVarItReached) {
  VarHandle a = engine().NewVariable();
  VarHandle b = engine().NewVariable();
  VarHandle c = engine().NewVariable();
  PushFailing(engine(), a, "root");
  engine().PushSync([](RunContext) {}, {a}, {b});  // skipped, passes "root" on
  ExpectOpFailure([&] { engine().WaitForVar(b); }, "root");
  int ran = 0;
  engine().PushSync([&](RunContext) { ++ran; }, {a}, {c});
  EXPECT_NO_THROW(engine().WaitForVar(c));
  EXPECT_NO_THROW(engine().WaitForAll());
  EXPECT_EQ(ran, 1);
}

TEST_P(ErrorPropagationTest, RacingWaitsReportAnErrorExactlyOnce) {
  for (int round = 0; round < 20; ++round) {
    VarHandle v = engine().NewVariable();
    PushFailing(engine(), v, "once");
    std::atomic<int> reports{0};
    std::vector<std::thread> waiters;
    for (int i = 0; i < 4; ++i) {
      waiters.emplace_back([&, i] {
        try {
          if (i == 0) {
            engine().WaitForAll();
          } else {
            engine().WaitForVar(v);
          }
        } catch (const OpFailure&) {
          ++reports;
        }
      });
    }
    for (std::thread& waiter : waiters) waiter.join();
    EXPECT_EQ(reports.load(), 1);
    engine().DeleteVariable(v);
  }
}

// A training loop that catches each step's error and goes on: every step
// after a failed one runs in full.
TEST_P(ErrorPropagationTest, ALoopThatCatchesErrorsRunsEveryLaterStep) {
  VarHandle weights = engine().NewVariable();
  VarHandle loss = engine().NewVariable();
  int steps_run = 0;
  for (int step = 0; step < 10; ++step) {
    if (step % 3 == 1) {
      PushFailing(engine(), weights, "bad batch");
    } else {
      engine().PushSync([&](RunContext) { ++steps_run; }, {loss}, {weights});
    }
    engine().PushSync([](RunContext) {}, {weights}, {loss});
    try {
      engine().WaitForAll();
    } catch (const OpFailure& e) {
      EXPECT_EQ(std::string(e.what()), "bad batch");
    }
  }
  EXPECT_EQ(steps_run, 7);
}

TEST_P(ErrorPropagationTest, EngineKeepsWorkingAfterErrors) {
  VarHandle v = engine().NewVariable();
  for (int round = 0; round < 20; ++round) {
    PushFailing(engine(), v, "again");
    ExpectOpFailure([&] { engine().WaitForVar(v); }, "again");
    int value = 0;
    engine().PushSync([&](RunContext) { value = round; }, {}, {v});
    engine().WaitForVar(v);
    EXPECT_EQ(value, round);
  }
}

// OnComplete::WithCheck: where no GPU work is in flight (here, a CPU op)
// the check runs at completion and its error is the op's; an empty check
// fails the op rather than leaving it uncompleted. (The GPU cases are in
// tests/engine/cuda/deferred_check_test.cc.)
TEST_P(ErrorPropagationTest, ACpuOpsDeferredCheckRunsAtCompletion) {
  VarHandle v = engine().NewVariable();
  engine().PushAsync(
      [](RunContext, const OnStart& start, const OnComplete& done) {
        start();
        done.WithCheck([] { return std::make_exception_ptr(OpFailure("checked")); });
      },
      {}, {v}, {.name = "checked"});
  ExpectOpFailure([&] { engine().WaitForVar(v); }, "checked");
  engine().PushAsync(
      [](RunContext, const OnStart& start, const OnComplete& done) {
        start();
        done.WithCheck([] { return std::exception_ptr(); });
      },
      {}, {v}, {.name = "passes"});
  EXPECT_NO_THROW(engine().WaitForVar(v));
  engine().PushAsync(
      [](RunContext, const OnStart& start, const OnComplete& done) {
        start();
        done.WithCheck({});
      },
      {}, {v}, {.name = "empty-check"});
  EXPECT_THROW(engine().WaitForVar(v), InvalidArgument);
  EXPECT_NO_THROW(engine().WaitForAll());
}

TEST_P(ErrorPropagationTest, ThrowReportsTheVarsErrorOnceWithoutWaiting) {
  VarHandle v = engine().NewVariable();
  PushFailing(engine(), v, "stored");
  // Waits without reporting: a kNoSkip read of v runs after the failure.
  std::atomic<bool> after{false};
  engine().PushSync([&](RunContext) { after = true; }, {v}, {},
                    {.prop = FnProperty::kNoSkip, .name = "after"});
  while (!after.load()) std::this_thread::yield();
  ExpectOpFailure([&] { engine().Throw(v); }, "stored");
  EXPECT_NO_THROW(engine().Throw(v));
  EXPECT_NO_THROW(engine().WaitForAll()) << "Throw reported it";
}

INSTANTIATE_TEST_SUITE_P(AllEngines, ErrorPropagationTest, ::testing::ValuesIn(AllEngineCases()),
                         CaseName);
INSTANTIATE_TEST_SUITE_P(AsyncEngines, ErrorPropagationTest,
                         ::testing::ValuesIn(AsyncEngineCases()), CaseName);

}  // namespace
}  // namespace ember::engine::testing
