// One test per misuse (CUDASTF's error_checks): each asserts the exception
// type and that its message says where and what.

#include <atomic>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/base/mutex.h"
#include "engine/error.h"
#include "tests/engine/engine_cases.h"

namespace ember::engine::testing {
namespace {

using ::testing::HasSubstr;
using MisuseTest = EngineTest;

// Runs `call`, expecting exception E whose message contains every fragment.
template <typename E, typename Fn>
void ExpectThrowWith(Fn&& call, const std::vector<std::string>& fragments) {
  try {
    call();
    ADD_FAILURE() << "no exception";
  } catch (const E& e) {
    for (const auto& fragment : fragments) EXPECT_THAT(e.what(), HasSubstr(fragment));
  }
}

TEST_P(MisuseTest, BadVarListsAreRefusedWithWhereAndWhat) {
  EngineOptions naive;
  naive.type = EngineType::kNaive;
  auto other = CreateEngine(naive);
  VarHandle good = engine().NewVariable();
  VarHandle deleted = engine().NewVariable();
  engine().DeleteVariable(deleted);
  const struct {
    VarHandle var;
    const char* why;
  } bad[] = {
      {VarHandle(), "null handle"},
      {other->NewVariable(), "another engine"},
      {deleted, "stale: its var was deleted"},
      {VarHandle::FromBits(0xdeadbeefcafe), "another engine"},
  };
  for (const auto& b : bad) {
    SCOPED_TRACE(b.why);
    ExpectThrowWith<InvalidArgument>(
        [&] {
          engine().PushSync([](RunContext) {}, {good, b.var}, {}, {.name = "bad"});
        },
        {"[Engine::PushSync] op 'bad'", "const var #1", b.why});
    ExpectThrowWith<InvalidArgument>(
        [&] {
          engine().PushAsync([](RunContext, const OnStart&, const OnComplete&) {}, {}, {b.var},
                             {.name = "bad"});
        },
        {"[Engine::PushAsync] op 'bad'", "mutable var #0", b.why});
    ExpectThrowWith<InvalidArgument>([&] { engine().WaitForVar(b.var); },
                                     {"[Engine::WaitForVar]", b.why});
    ExpectThrowWith<InvalidArgument>([&] { (void)engine().VarVersion(b.var); },
                                     {"[Engine::VarVersion]", b.why});
  }
  engine().WaitForAll();  // nothing bad was queued
}

TEST_P(MisuseTest, DeletingAVarTwiceIsRefused) {
  VarHandle v = engine().NewVariable();
  engine().DeleteVariable(v);
  ExpectThrowWith<InvalidArgument>([&] { engine().DeleteVariable(v); },
                                   {"[Engine::DeleteVariable]", "stale"});
}

TEST_P(MisuseTest, StaleHandleDoesNotReachAReusedSlot) {
  VarHandle old = engine().NewVariable();
  engine().DeleteVariable(old);
  engine().WaitForAll();
  VarHandle reused = engine().NewVariable();  // likely the same slot
  EXPECT_NE(old, reused);
  ExpectThrowWith<InvalidArgument>([&] { engine().WaitForVar(old); }, {"stale"});
  EXPECT_NO_THROW(engine().WaitForVar(reused));
}

// The current handle of a reused slot must not vouch for a stale one named
// in the same op.
TEST_P(MisuseTest, StaleHandleBesideTheCurrentOneIsRefused) {
  VarHandle old = engine().NewVariable();
  engine().DeleteVariable(old);
  engine().WaitForAll();
  VarHandle reused = engine().NewVariable();
  if ((old.bits() & 0xFFFFFF) != (reused.bits() & 0xFFFFFF)) GTEST_SKIP() << "slot not reused";
  bool ran = false;
  ExpectThrowWith<InvalidArgument>(
      [&] {
        engine().PushSync([&ran](RunContext) { ran = true; }, {reused}, {old}, {.name = "s"});
      },
      {"op 's'", "stale"});
  ExpectThrowWith<InvalidArgument>(
      [&] { (void)engine().NewOperator([](RunContext, auto&, auto&) {}, {old}, {reused}); },
      {"stale"});
  engine().WaitForAll();
  EXPECT_FALSE(ran);
}

// An operator handle kept after DeleteOperator is refused, also once the
// operator is gone (no push held it) and its slot holds a new operator,
// which must not run in its place; so are null and foreign handles.
TEST_P(MisuseTest, StaleNullAndForeignOperatorHandlesAreRefused) {
  VarHandle v = engine().NewVariable();
  auto op_on = [&](std::atomic<int>* runs, std::string_view name) {
    return engine().NewOperator(
        [runs](RunContext, const OnStart& start, const OnComplete& complete) {
          start();
          runs->fetch_add(1);
          complete();
        },
        {}, {v}, {.name = name});
  };
  std::atomic<int> old_runs{0};
  std::atomic<int> new_runs{0};
  const OprHandle old = op_on(&old_runs, "old");
  engine().DeleteOperator(old);  // nothing pushed: the operator is freed
  const OprHandle reused = op_on(&new_runs, "new");
  ExpectThrowWith<UsageError>([&] { engine().Push(old, Context::CPU()); },
                              {"[Engine::Push] operator 'old' was deleted"});
  ExpectThrowWith<UsageError>([&] { engine().DeleteOperator(old); },
                              {"[Engine::DeleteOperator] operator 'old' was deleted"});
  engine().Push(reused, Context::CPU());
  engine().WaitForVar(v);
  EXPECT_EQ(old_runs.load(), 0);
  EXPECT_EQ(new_runs.load(), 1) << "the stale handle ran the operator that took its slot";
  engine().DeleteOperator(reused);

  ExpectThrowWith<InvalidArgument>([&] { engine().Push(OprHandle(), Context::CPU()); },
                                   {"[Engine::Push] null operator handle"});
  ExpectThrowWith<InvalidArgument>([&] { engine().DeleteOperator(nullptr); },
                                   {"[Engine::DeleteOperator] null operator handle"});
  EngineOptions naive;
  naive.type = EngineType::kNaive;
  auto other = CreateEngine(naive);
  const OprHandle foreign =
      other->NewOperator([](RunContext, const OnStart&, const OnComplete&) {}, {}, {});
  ExpectThrowWith<InvalidArgument>([&] { engine().Push(foreign, Context::CPU()); },
                                   {"[Engine::Push]", "another engine"});
  other->DeleteOperator(foreign);
}

// An operator the program never deleted is released with its engine (its
// function and what it holds), not leaked.
TEST(OperatorLifetime, AnEngineReleasesTheOperatorsNeverDeleted) {
  auto token = std::make_shared<int>(7);
  {
    auto engine = CreateEngine(EngineOptions{});
    const OprHandle op = engine->NewOperator(
        [token](RunContext, const OnStart& start, const OnComplete& complete) {
          start();
          complete();
        },
        {}, {engine->NewVariable()});
    engine->Push(op, Context::CPU());
    engine->WaitForAll();
    EXPECT_EQ(token.use_count(), 2);
  }
  EXPECT_EQ(token.use_count(), 1);
}

// What an operator's function holds may call the engine as it is
// destroyed (a captured tensor deletes its var): an operator never deleted
// is released while its engine still runs what that pushes.
class DeletesVarOnDestruction {
 public:
  DeletesVarOnDestruction(Engine* engine, std::atomic<bool>* deleted)
      : engine_(engine), var_(engine->NewVariable()), deleted_(deleted) {}
  ~DeletesVarOnDestruction() {
    engine_->DeleteVariable(var_, [deleted = deleted_](RunContext) { deleted->store(true); });
  }
  DeletesVarOnDestruction(const DeletesVarOnDestruction&) = delete;
  DeletesVarOnDestruction& operator=(const DeletesVarOnDestruction&) = delete;

 private:
  Engine* engine_;
  VarHandle var_;
  std::atomic<bool>* deleted_;
};

TEST(OperatorLifetime, AReleasedOperatorsFunctionMayCallItsEngine) {
  for (const char* type : {"NaiveEngine", "ThreadedEngine", "ThreadedEnginePerDevice",
                           "ThreadedEnginePerDeviceAsync"}) {
    SCOPED_TRACE(type);
    std::atomic<bool> deleted{false};
    {
      auto engine = CreateEngine(ParseEngineType(type));
      auto held = std::make_shared<DeletesVarOnDestruction>(engine.get(), &deleted);
      (void)engine->NewOperator(
          [held](RunContext, const OnStart& start, const OnComplete& complete) {
            start();
            complete();
          },
          {}, {engine->NewVariable()});
    }
    EXPECT_TRUE(deleted.load()) << "the var deletion pushed as the operator went never ran";
  }
}

TEST_P(MisuseTest, DeleteVarPropertyIsTheEnginesOwn) {
  VarHandle v = engine().NewVariable();
  const OpAttrs attrs{.prop = FnProperty::kDeleteVar, .name = "d"};
  ExpectThrowWith<InvalidArgument>([&] { engine().PushSync([](RunContext) {}, {}, {v}, attrs); },
                                   {"[Engine::PushSync] op 'd'", "kDeleteVar"});
  ExpectThrowWith<InvalidArgument>(
      [&] {
        engine().PushAsync(
            [](RunContext, const OnStart& s, const OnComplete& c) {
              s();
              c();
            },
            {}, {v}, attrs);
      },
      {"[Engine::PushAsync] op 'd'", "Engine::DeleteVariable"});
  ExpectThrowWith<InvalidArgument>(
      [&] { (void)engine().NewOperator([](RunContext, auto&, auto&) {}, {}, {v}, attrs); },
      {"[Engine::NewOperator] op 'd'", "kDeleteVar"});
  engine().WaitForAll();
}

TEST_P(MisuseTest, WaitingInsideAnOpIsAnError) {
  VarHandle other = engine().NewVariable();
  VarHandle out = engine().NewVariable();
  engine().PushSync([&](RunContext) { engine().WaitForVar(other); }, {}, {out}, {.name = "waiter"});
  ExpectThrowWith<UsageError>([&] { engine().WaitForVar(out); },
                              {"[Engine::WaitForVar] called from inside op 'waiter'"});
  engine().PushSync([&](RunContext) { engine().WaitForAll(); }, {}, {out}, {.name = "waiter2"});
  ExpectThrowWith<UsageError>([&] { engine().WaitForVar(out); },
                              {"[Engine::WaitForAll] called from inside op 'waiter2'"});
}

TEST_P(MisuseTest, CompletingTwiceIsAnError) {
  VarHandle v = engine().NewVariable();
  std::string second_call;
  ember::Notification tried;  // the op runs on after its first done()
  engine().PushAsync(
      [&](RunContext, const OnStart& start, const OnComplete& done) {
        start();
        done();
        try {
          done();
        } catch (const UsageError& e) {
          second_call = e.what();
        }
        tried.Notify();
      },
      {}, {v}, {.name = "twice"});
  tried.WaitForNotification();
  engine().WaitForAll();
  EXPECT_THAT(second_call, HasSubstr("[OnComplete] op 'twice' completed twice"));
}

// An async op that returns without calling on_complete and keeps no copy
// of it could never complete: it fails instead of hanging its waiters.
TEST_P(MisuseTest, AnAsyncOpThatDropsOnCompleteFailsInsteadOfHanging) {
  VarHandle v = engine().NewVariable();
  engine().PushAsync([](RunContext, const OnStart& on_start, const OnComplete&) { on_start(); }, {},
                     {v}, {.name = "forgetful"});
  ExpectThrowWith<UsageError>([&] { engine().WaitForVar(v); },
                              {"async op 'forgetful' returned without calling on_complete"});
  // A copy kept and dropped uncalled is the same loss.
  engine().PushAsync(
      [](RunContext, const OnStart&, const OnComplete& on_complete) {
        std::thread([done = on_complete] {}).join();
      },
      {}, {v}, {.name = "dropped"});
  ExpectThrowWith<UsageError>([&] { engine().WaitForAll(); }, {"async op 'dropped'"});
  int ran = 0;  // the var is usable again
  engine().PushSync([&ran](RunContext) { ++ran; }, {v}, {});
  engine().WaitForAll();
  EXPECT_EQ(ran, 1);
}

// No machine has 1000 GPUs; without any GPU (CI), gpu(0) is refused alike.
TEST_P(MisuseTest, GpuThatDoesNotExistIsUnavailable) {
  VarHandle v = engine().NewVariable();
  ExpectThrowWith<Unavailable>(
      [&] {
        engine().PushSync([](RunContext) {}, {}, {v}, {.ctx = Context::GPU(1000), .name = "k"});
      },
      {"[Engine::PushSync] op 'k'", "gpu(1000) is not available: this engine has", "GPU(s)"});
  ExpectThrowWith<Unavailable>(
      [&] {
        engine().PushSync([](RunContext) {}, {}, {v}, {.ctx = Context::GPU(-1), .name = "k"});
      },
      {"gpu(-1) is not available"});
}

TEST_P(MisuseTest, EmptyFunctionAndNegativeBulkSizeAreRefused) {
  ExpectThrowWith<InvalidArgument>([&] { engine().PushSync(SyncFn(), {}, {}, {.name = "e"}); },
                                   {"op 'e'", "empty function"});
  ExpectThrowWith<InvalidArgument>([&] { engine().SetBulkSize(-1); },
                                   {"[Engine::SetBulkSize]", "-1"});
}

TEST(EngineOptionsMisuse, BadOptionsNameTheField) {
  EngineOptions options;
  options.cpu_workers = 0;
  ExpectThrowWith<InvalidArgument>([&] { (void)CreateEngine(options); },
                                   {"[CreateEngine]", "cpu_workers = 0"});
}

INSTANTIATE_TEST_SUITE_P(AllEngines, MisuseTest, ::testing::ValuesIn(AllEngineCases()), CaseName);
INSTANTIATE_TEST_SUITE_P(AsyncEngines, MisuseTest, ::testing::ValuesIn(AsyncEngineCases()),
                         CaseName);

}  // namespace
}  // namespace ember::engine::testing
