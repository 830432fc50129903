// Errors travel like data: a failed op marks what it writes, ops that touch a
// failed var are skipped (unless kNoSkip) and pass the error on, waits rethrow
// it, and the engine keeps working afterwards.

#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

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
  int ran = 0;
  PushFailing(engine(), a, "bad input");
  engine().PushSync([&](RunContext) { ++ran; }, {a}, {b}, {.prop = FnProperty::kNoSkip});
  ExpectOpFailure([&] { engine().WaitForVar(b); }, "bad input");
  EXPECT_EQ(ran, 1);
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

TEST_P(ErrorPropagationTest, FirstOfTwoErrorsIsReportedByWaitForAll) {
  VarHandle a = engine().NewVariable();
  VarHandle b = engine().NewVariable();
  PushFailing(engine(), a, "one");
  engine().PushSync([](RunContext) { throw OpFailure("two"); }, {a}, {b},
                    {.prop = FnProperty::kNoSkip});
  ExpectOpFailure([&] { engine().WaitForAll(); }, "one");
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

TEST_P(ErrorPropagationTest, ThrowReportsTheVarsErrorOnceWithoutWaiting) {
  VarHandle v = engine().NewVariable();
  PushFailing(engine(), v, "stored");
  // WaitForAll reports the engine's first error; the var keeps its own.
  ExpectOpFailure([&] { engine().WaitForAll(); }, "stored");
  ExpectOpFailure([&] { engine().Throw(v); }, "stored");
  EXPECT_NO_THROW(engine().Throw(v));
}

INSTANTIATE_TEST_SUITE_P(AllEngines, ErrorPropagationTest, ::testing::ValuesIn(AllEngineCases()),
                         CaseName);

}  // namespace
}  // namespace ember::engine::testing
