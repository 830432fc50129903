// OnComplete::WithCheck (engine.h): a GPU op's check runs on the host once
// its GPU work is done, without a worker waiting for the GPU, and its error
// reaches the first wait on the op's outputs (WaitForVar, a CPU op reading
// them, WaitForAll), once. The kernels here store a "fault" into pinned
// memory after a delay; the check reads it. Skipped without a CUDA device.

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "engine/base/device.h"
#include "engine/cuda/check.h"
#include "engine/engine.h"
#include "tests/engine/cuda/test_kernels.h"

namespace ember::engine::testing {
namespace {

struct Fault : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class DeferredCheckTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (GpuCount() == 0) GTEST_SKIP() << "no CUDA device (or driver)";
    EngineOptions options;
    options.async_gpu = GetParam();
    engine_ = CreateEngine(options);
    CudaCheck(cudaMallocHost(reinterpret_cast<void**>(&fault_), sizeof(int)), "cudaMallocHost");
    *fault_ = 0;
  }
  void TearDown() override {
    engine_.reset();
    if (fault_ != nullptr) CudaLogIfError(cudaFreeHost(fault_), "cudaFreeHost");
  }

  // A GPU op writing `v` whose kernel stores `fault` after `delay_us`; its
  // check throws Fault when the stored value is not 0.
  void PushChecked(VarHandle v, int fault, int delay_us) {
    int* flag = fault_;
    engine_->PushAsync(
        [flag, fault, delay_us](RunContext ctx, const OnStart& start, const OnComplete& done) {
          start();
          LaunchDelayedStore(static_cast<cudaStream_t>(ctx.stream), flag, fault, delay_us);
          done.WithCheck([flag]() -> std::exception_ptr {
            if (*flag == 0) return nullptr;
            return std::make_exception_ptr(Fault("fault " + std::to_string(*flag)));
          });
        },
        {}, {v}, {.ctx = Context::GPU(0), .name = "checked"});
  }

  std::unique_ptr<Engine> engine_;
  int* fault_ = nullptr;
};

TEST_P(DeferredCheckTest, WaitForVarReportsTheChecksErrorOnce) {
  VarHandle v = engine_->NewVariable();
  PushChecked(v, 7, 20'000);
  try {
    engine_->WaitForVar(v);
    ADD_FAILURE() << "the check's error was not reported";
  } catch (const Fault& e) {
    EXPECT_STREQ(e.what(), "fault 7");
  }
  EXPECT_NO_THROW(engine_->WaitForVar(v));
  EXPECT_NO_THROW(engine_->WaitForAll());
}

TEST_P(DeferredCheckTest, APassingCheckReportsNothing) {
  VarHandle v = engine_->NewVariable();
  PushChecked(v, 0, 1000);
  EXPECT_NO_THROW(engine_->WaitForVar(v));
  EXPECT_NO_THROW(engine_->WaitForAll());
}

TEST_P(DeferredCheckTest, ACpuOpReadingTheOutputIsSkippedAndPassesItOn) {
  VarHandle v = engine_->NewVariable();
  VarHandle out = engine_->NewVariable();
  PushChecked(v, 3, 20'000);
  std::atomic<bool> ran{false};
  engine_->PushSync([&](RunContext) { ran = true; }, {v}, {out}, {.name = "reader"});
  try {
    engine_->WaitForVar(out);
    ADD_FAILURE() << "the check's error did not reach the reader's output";
  } catch (const Fault& e) {
    EXPECT_STREQ(e.what(), "fault 3");
  }
  EXPECT_FALSE(ran.load()) << "a CPU op read an output whose check failed";
  EXPECT_NO_THROW(engine_->WaitForAll()) << "one error, reported once";
}

TEST_P(DeferredCheckTest, WaitForAllReportsAnUnwaitedCheck) {
  VarHandle v = engine_->NewVariable();
  PushChecked(v, 5, 1000);
  EXPECT_THROW(engine_->WaitForAll(), Fault);
  EXPECT_NO_THROW(engine_->WaitForVar(v)) << "reported by WaitForAll";
}

// The point of the check: the op completes at launch (Async), so its worker
// never waits for the kernel; a plain engine syncs the stream and runs the
// check at completion.
TEST_P(DeferredCheckTest, TheOpCompletesBeforeItsKernelEndsInTheAsyncEngines) {
  VarHandle v = engine_->NewVariable();
  PushChecked(v, 0, 300'000);  // a 300 ms kernel
  const auto start = std::chrono::steady_clock::now();
  while (engine_->VarVersion(v) == 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
  const auto completed = std::chrono::steady_clock::now() - start;
  if (GetParam()) {
    EXPECT_LT(completed, std::chrono::milliseconds(150)) << "the worker waited for the kernel";
  } else {
    EXPECT_GE(completed, std::chrono::milliseconds(250)) << "the plain engine did not sync";
  }
  engine_->WaitForAll();
}

TEST_P(DeferredCheckTest, ALaterWriteIsNotBlamedForAnEarlierCheck) {
  VarHandle v = engine_->NewVariable();
  PushChecked(v, 9, 20'000);
  // Written again (on the CPU, after the GPU work) before anyone waited: the
  // later write's result does not carry the check's error, WaitForAll does.
  engine_->PushSync([](RunContext) {}, {}, {v}, {.prop = FnProperty::kNoSkip, .name = "later"});
  EXPECT_THROW(engine_->WaitForAll(), Fault);
  EXPECT_NO_THROW(engine_->WaitForVar(v));
}

INSTANTIATE_TEST_SUITE_P(PlainAndAsync, DeferredCheckTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "Async" : "Plain");
                         });

}  // namespace
}  // namespace ember::engine::testing
