// Lifetimes (Abseil's lifetime_test): destroying an engine with work in
// flight finishes that work; exiting with the process-wide engine alive
// drains it; fork() leaves the parent's engine working and gives the child a
// clear error, or a fresh process-wide engine.

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/error.h"
#include "tests/engine/engine_cases.h"

namespace ember::engine::testing {
namespace {

using std::chrono::microseconds;

class LifetimeTest : public ::testing::TestWithParam<EngineCase> {};

TEST_P(LifetimeTest, DestroyingWithWorkInFlightFinishesIt) {
  std::atomic<int> done{0};
  {
    auto engine = CreateEngine(OptionsFor(GetParam()));
    VarHandle chain = engine->NewVariable();
    for (int i = 0; i < 300; ++i) {
      VarHandle own = engine->NewVariable();
      engine->PushSync([&](RunContext) { std::this_thread::sleep_for(microseconds(20)), ++done; },
                       {chain}, {own});
      engine->PushSync([&](RunContext) { ++done; }, {}, {chain});
    }
  }
  EXPECT_EQ(done.load(), 600);
}

TEST_P(LifetimeTest, DestroyingAfterUnobservedErrorsFinishesTheWork) {
  std::atomic<int> after_error{0};
  {
    auto engine = CreateEngine(OptionsFor(GetParam()));
    VarHandle v = engine->NewVariable();
    engine->PushSync([](RunContext) { throw std::runtime_error("never observed"); }, {}, {v});
    for (int i = 0; i < 10; ++i) {
      engine->PushSync([&](RunContext) { ++after_error; }, {v}, {}, {.prop = FnProperty::kNoSkip});
    }
  }  // the destructor neither throws the error nor drops the ops behind it
  EXPECT_EQ(after_error.load(), 10);
}

TEST(ProcessWideEngine, ExitWithWorkInFlightDrainsIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        Engine& engine = Engine::Get();
        VarHandle v = engine.NewVariable();
        static std::atomic<int> done{0};
        for (int i = 0; i < 200; ++i) {
          engine.PushSync(
              [](RunContext) {
                std::this_thread::sleep_for(microseconds(200));
                if (++done == 200) std::fprintf(stderr, "all 200 ops ran\n");
              },
              {}, {v});
        }
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "all 200 ops ran");
}

TEST(ForkTest, ParentKeepsWorkingChildGetsClearErrorOrFreshEngine) {
  auto engine = CreateEngine(EngineOptions{});
  VarHandle v = engine->NewVariable();
  int value = 0;
  for (int i = 0; i < 1000; ++i) engine->PushSync([&value](RunContext) { ++value; }, {}, {v});

  const pid_t child = fork();
  ASSERT_NE(child, -1);
  if (child == 0) {
    int status = 0;
    try {
      engine->PushSync([](RunContext) {}, {}, {v});
      status = 10;  // no error: wrong
    } catch (const UsageError& e) {
      if (std::string(e.what()).find("fork()") == std::string::npos) status = 11;
    }
    Engine& fresh = Engine::Get();
    VarHandle w = fresh.NewVariable();
    int child_value = 0;
    fresh.PushSync([&child_value](RunContext) { child_value = 7; }, {}, {w});
    fresh.WaitForVar(w);
    if (child_value != 7) status = 12;
    // _exit: the parent's threads own memory the child cannot free (and that
    // LeakSanitizer would report); draining at exit has its own test.
    _exit(status);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: no error in child, 11: unclear message, 12: fresh "
                                       "engine failed";
  engine->WaitForVar(v);
  EXPECT_EQ(value, 1000);
  engine->PushSync([&value](RunContext) { value = -1; }, {}, {v});
  engine->WaitForVar(v);
  EXPECT_EQ(value, -1);
}

INSTANTIATE_TEST_SUITE_P(AllEngines, LifetimeTest, ::testing::ValuesIn(AllEngineCases()), CaseName);

}  // namespace
}  // namespace ember::engine::testing
