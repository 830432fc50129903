// EngineOptions::FromEnv and engine names: the environment is read in one
// place, every knob is parsed, and bad values say which variable is wrong.

#include "engine/engine_options.h"

#include <cstdlib>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/base/device.h"
#include "engine/engine.h"
#include "engine/error.h"

namespace ember::engine {
namespace {

using ::testing::HasSubstr;

// Sets environment variables for one test and restores them after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_.empty()) {
      unsetenv(name_);
    } else {
      setenv(name_, old_.c_str(), 1);
    }
  }

 private:
  const char* name_;
  std::string old_;
};

TEST(EngineOptionsTest, EveryNameParses) {
  for (const std::string& name : EngineTypeNames()) {
    const EngineOptions options = ParseEngineType(name);
    EXPECT_EQ(std::string(ToString(options.type)) + (options.async_gpu ? "Async" : ""), name);
    EXPECT_EQ(CreateEngine(options)->name(), name);
  }
}

TEST(EngineOptionsTest, UnknownEngineTypeListsTheValidNames) {
  ScopedEnv env("ENGINE_TYPE", "ThreadedEnginePerDevic");
  try {
    (void)EngineOptions::FromEnv();
    FAIL() << "no exception";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("ENGINE_TYPE"));
    EXPECT_THAT(e.what(), HasSubstr("unknown engine type 'ThreadedEnginePerDevic'"));
    for (const std::string& name : EngineTypeNames()) EXPECT_THAT(e.what(), HasSubstr(name));
  }
}

TEST(EngineOptionsTest, KnobsComeFromTheEnvironment) {
  ScopedEnv type("ENGINE_TYPE", "ThreadedEngineAsync");
  ScopedEnv cpu("EMBER_CPU_WORKER_NTHREADS", "3");
  ScopedEnv prio("EMBER_CPU_PRIORITY_NTHREADS", "5");
  ScopedEnv pool("EMBER_NUM_WORKER_THREADS", "7");
  ScopedEnv bound("EMBER_ENGINE_MAX_INFLIGHT", "1000");
  ScopedEnv pace("EMBER_ENGINE_PACE_INFLIGHT", "0");
  ScopedEnv bulk("EMBER_ENGINE_BULK_SIZE", "16");
  ScopedEnv gpu("EMBER_GPU_WORKER_NTHREADS", "4");
  ScopedEnv copies("EMBER_GPU_COPY_NTHREADS", "2");
  ScopedEnv gpu_prio("EMBER_GPU_PRIORITY_NTHREADS", "3");
  ScopedEnv events("EMBER_GPU_EVENT_POOL_SIZE", "2");
  ScopedEnv spin("EMBER_GPU_WORKER_SPIN_US", "7");
  ScopedEnv cpu_spin("EMBER_CPU_WORKER_SPIN_US", "9");
  ScopedEnv ranks("EMBER_GPU_STREAM_PRIORITIES", "0");
  ScopedEnv profile("ENGINE_PROFILE", "/tmp/trace.json");
  const EngineOptions options = EngineOptions::FromEnv();
  EXPECT_EQ(options.type, EngineType::kThreaded);
  EXPECT_TRUE(options.async_gpu);
  EXPECT_EQ(options.cpu_workers, 3);
  EXPECT_EQ(options.cpu_priority_workers, 5);
  EXPECT_EQ(options.pool_workers, 7);
  EXPECT_EQ(options.max_in_flight, 1000);
  EXPECT_EQ(options.pace_in_flight, 0);
  EXPECT_EQ(options.bulk_size, 16);
  EXPECT_EQ(options.gpu_workers, 4);
  EXPECT_EQ(options.gpu_copy_workers, 2);
  EXPECT_EQ(options.gpu_priority_workers, 3);
  EXPECT_EQ(options.gpu_event_pool_size, 2);
  EXPECT_EQ(options.gpu_worker_spin_us, 7);
  EXPECT_EQ(options.cpu_worker_spin_us, 9);
  EXPECT_FALSE(options.gpu_stream_priorities);
  EXPECT_EQ(options.profile_path, "/tmp/trace.json");
}

// A program ported from MXNet keeps its MXNET_ENGINE_TYPE; ENGINE_TYPE wins.
TEST(EngineOptionsTest, MxnetEngineTypeIsReadWhenEngineTypeIsUnset) {
  ScopedEnv ember_type("ENGINE_TYPE", "");
  ScopedEnv mxnet_type("MXNET_ENGINE_TYPE", "NaiveEngine");
  EXPECT_EQ(EngineOptions::FromEnv().type, EngineType::kNaive);
  {
    ScopedEnv both("ENGINE_TYPE", "ThreadedEngine");
    EXPECT_EQ(EngineOptions::FromEnv().type, EngineType::kThreaded);
  }
  ScopedEnv bad("MXNET_ENGINE_TYPE", "ThreadedEnginePooled");
  try {
    (void)EngineOptions::FromEnv();
    FAIL() << "no exception";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("MXNET_ENGINE_TYPE"));
    EXPECT_THAT(e.what(), HasSubstr("'ThreadedEnginePooled'"));
  }
}

TEST(EngineOptionsTest, DefaultIsThreadedEnginePerDevice) {
  ScopedEnv env("ENGINE_TYPE", "");
  EXPECT_EQ(EngineOptions::FromEnv().type, EngineType::kThreadedPerDevice);
}

TEST(EngineOptionsTest, HostMemoryGpuMustNameAGpu) {
  using ::testing::HasSubstr;
  using ::testing::ThrowsMessage;
  EngineOptions options;
  auto create = [&options] { (void)CreateEngine(options); };
  options.host_memory_gpu = -1;
  EXPECT_THAT(create,
              ThrowsMessage<InvalidArgument>(HasSubstr("host_memory_gpu = -1 must be at least 0")));
  options.host_memory_gpu = 4096;  // more GPUs than any machine has
  if (GpuCount() == 0) {
    EXPECT_NO_THROW(create()) << "without a GPU the option is not used";
    return;
  }
  EXPECT_THAT(create, ThrowsMessage<InvalidArgument>(
                          HasSubstr("host_memory_gpu = 4096: this machine has")));
}

TEST(EngineOptionsTest, BadNumberNamesTheVariable) {
  ScopedEnv env("EMBER_CPU_WORKER_NTHREADS", "two");
  try {
    (void)EngineOptions::FromEnv();
    FAIL() << "no exception";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("EMBER_CPU_WORKER_NTHREADS='two'"));
  }
}

}  // namespace
}  // namespace ember::engine
