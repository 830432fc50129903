// The engine with GPU ops, on every engine type, plain and Async: GPU ops run
// on their workers' streams and hand dependencies on through host syncs
// (plain) or CUDA events (Async); CPU ops see the GPU's final writes; errors
// of launches travel like CPU errors. Skipped without a CUDA device.

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/base/device.h"
#include "engine/base/mutex.h"
#include "engine/cuda/check.h"
#include "engine/engine.h"
#include "engine/error.h"
#include "engine/testing/random_workload.h"
#include "tests/engine/cuda/test_kernels.h"

namespace ember::engine::testing {
namespace {

using ::testing::HasSubstr;

struct GpuCase {
  EngineType type;
  bool async;
  int event_pool = 256;  // 2: events are recycled all the time
};

std::string GpuCaseName(const ::testing::TestParamInfo<GpuCase>& info) {
  return std::string(ToString(info.param.type)) + (info.param.async ? "Async" : "") +
         (info.param.event_pool == 2 ? "_Pool2" : "");
}

// The workload's function over pinned memory, which CPU ops and GPU kernels
// both use. Same formula as ApplyOp (and the Apply kernel).
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
void HostApply(const WorkloadOp& op, uint64_t* data) {
  uint64_t acc = Mix(op.id);
  for (size_t k = 0; k < op.reads.size(); ++k) acc = Mix(acc ^ (data[op.reads[k]] + k));
  data[op.write] = acc;
}

// Pinned host memory (zeroed) that kernels and CPU ops both use; freed on
// scope exit, also when an assertion ends the test early.
template <typename T>
class Pinned {
 public:
  explicit Pinned(size_t count) {
    CudaCheck(cudaMallocHost(reinterpret_cast<void**>(&data_), count * sizeof(T)),
              "cudaMallocHost");
    std::fill(data_, data_ + count, T{});
  }
  ~Pinned() { ember::CudaLogIfError(cudaFreeHost(data_), "cudaFreeHost"); }
  Pinned(const Pinned&) = delete;
  Pinned& operator=(const Pinned&) = delete;
  T* get() const { return data_; }

 private:
  T* data_ = nullptr;
};

class GpuEngineTest : public ::testing::TestWithParam<GpuCase> {
 protected:
  void SetUp() override {
    if (ember::GpuCount() == 0) GTEST_SKIP() << "no CUDA device (or driver)";
    EngineOptions options;
    options.type = GetParam().type;
    options.async_gpu = GetParam().async;
    options.cpu_workers = 2;
    options.pool_workers = 4;
    options.gpu_event_pool_size = GetParam().event_pool;
    engine_ = CreateEngine(options);
  }

  std::unique_ptr<Engine> engine_;
};

// The workload test of the brief: random ops over random vars, each a CPU
// op or a GPU kernel of random length on a random GPU worker kind, with
// random properties; the result must equal the serial run exactly.
TEST_P(GpuEngineTest, RandomCpuGpuWorkloadMatchesSerialRun) {
  WorkloadSpec spec;
  spec.num_ops = 3000;
  spec.num_vars = 40;
  spec.min_reads = 1;
  spec.max_reads = 6;
  spec.seed = 99;
  const Workload workload = MakeRandomWorkload(spec);
  Pinned<uint64_t> pinned_data(workload.num_vars);
  uint64_t* data = pinned_data.get();
  std::copy(workload.initial.begin(), workload.initial.end(), data);
  std::vector<VarHandle> vars;
  for (int v = 0; v < workload.num_vars; ++v) vars.push_back(engine_->NewVariable());

  std::mt19937 rng(3);
  constexpr FnProperty kGpuProps[] = {FnProperty::kNormal,      FnProperty::kCopyToGPU,
                                      FnProperty::kCopyFromGPU, FnProperty::kGPUPrioritized,
                                      FnProperty::kNoSkip,      FnProperty::kAsync};
  constexpr FnProperty kCpuProps[] = {FnProperty::kNormal, FnProperty::kCPUPrioritized,
                                      FnProperty::kAsync, FnProperty::kNoSkip};
  for (const WorkloadOp& op : workload.ops) {
    std::vector<VarHandle> reads;
    for (int r : op.reads) reads.push_back(vars[r]);
    const bool on_gpu = rng() % 3 != 0;
    OpAttrs attrs{.ctx = on_gpu ? Context::GPU(0) : Context::CPU(),
                  .prop = on_gpu ? kGpuProps[rng() % 6] : kCpuProps[rng() % 4],
                  .priority = static_cast<int>(rng() % 5),
                  .name = on_gpu ? "gpu-op" : "cpu-op"};
    DeviceOp device_op;
    device_op.id = op.id;
    device_op.num_reads = static_cast<int>(op.reads.size());
    std::copy(op.reads.begin(), op.reads.end(), device_op.reads);
    device_op.write = op.write;
    device_op.delay_us = static_cast<int>(rng() % 30);
    engine_->PushAsync(
        [&op, device_op, data, on_gpu](RunContext ctx, const OnStart& start,
                                       const OnComplete& done) {
          start();
          if (on_gpu) {
            LaunchApply(static_cast<cudaStream_t>(ctx.stream), data, device_op);
          } else {
            HostApply(op, data);
          }
          done();
        },
        reads, {vars[op.write]}, attrs);
  }
  // kDeleteVar on the GPU: each deletion runs after the var's GPU work, on a
  // GPU worker's stream, and copies the var's final value out there.
  Pinned<uint64_t> pinned_final(workload.num_vars);
  uint64_t* final_values = pinned_final.get();
  for (int v = 0; v < workload.num_vars; ++v) {
    engine_->DeleteVariable(
        vars[v],
        [=](RunContext ctx) {
          CudaCheck(cudaMemcpyAsync(&final_values[v], &data[v], sizeof(uint64_t), cudaMemcpyDefault,
                                    static_cast<cudaStream_t>(ctx.stream)),
                    "copy out at deletion");
        },
        Context::GPU(0));
  }
  engine_->WaitForAll();
  const std::vector<uint64_t> expected = RunSerial(workload);
  EXPECT_EQ(std::vector<uint64_t>(data, data + workload.num_vars), expected);
  EXPECT_EQ(std::vector<uint64_t>(final_values, final_values + workload.num_vars), expected);
}

// A 10,000-op chain on one var whose ops hop between the GPU worker kinds
// (so between streams); each op checks it follows its predecessor.
TEST_P(GpuEngineTest, TenThousandOpChainAcrossStreamsKeepsOrder) {
  Pinned<int> pinned_counter(2);
  int* counter = pinned_counter.get();
  VarHandle v = engine_->NewVariable();
  constexpr FnProperty kProps[] = {FnProperty::kNormal, FnProperty::kCopyToGPU,
                                   FnProperty::kGPUPrioritized, FnProperty::kCopyFromGPU};
  constexpr int kOps = 10000;
  for (int i = 0; i < kOps; ++i) {
    engine_->PushAsync(
        [counter, i](RunContext ctx, const OnStart& start, const OnComplete& done) {
          start();
          LaunchCheckedIncrement(static_cast<cudaStream_t>(ctx.stream), &counter[0], i, &counter[1],
                                 i % 3);
          done();
        },
        {}, {v}, {.ctx = Context::GPU(0), .prop = kProps[i % 4], .name = "hop"});
  }
  engine_->WaitForAll();
  EXPECT_EQ(counter[0], kOps);
  EXPECT_EQ(counter[1], 0) << "ops of the chain ran out of order";
}

TEST_P(GpuEngineTest, CpuOpReadingAGpuWrittenVarSeesTheFinalValue) {
  Pinned<int> pinned_value(1);
  int* value = pinned_value.get();
  VarHandle v = engine_->NewVariable();
  engine_->PushAsync(
      [value](RunContext ctx, const OnStart& start, const OnComplete& done) {
        start();
        LaunchDelayedStore(static_cast<cudaStream_t>(ctx.stream), value, 42, 5000);
        done();
      },
      {}, {v}, {.ctx = Context::GPU(0), .name = "slow-store"});
  int seen = -1;
  engine_->PushSync([&](RunContext) { seen = *value; }, {v}, {});
  engine_->WaitForAll();
  EXPECT_EQ(seen, 42);
}

// WaitForVar follows the GPU work of the writes it waits for (in the Async
// engines the write's op completes at launch, its kernel runs on).
TEST_P(GpuEngineTest, WaitForVarWaitsForTheGpuWorkOfEarlierWrites) {
  Pinned<int> pinned_value(1);
  int* value = pinned_value.get();
  VarHandle v = engine_->NewVariable();
  for (int round = 1; round <= 5; ++round) {
    engine_->PushAsync(
        [value, round](RunContext ctx, const OnStart& start, const OnComplete& done) {
          start();
          LaunchDelayedStore(static_cast<cudaStream_t>(ctx.stream), value, round, 20000);
          done();
        },
        {}, {v}, {.ctx = Context::GPU(0), .name = "slow-store"});
    engine_->WaitForVar(v);
    EXPECT_EQ(*value, round) << "WaitForVar returned before the kernel of the write";
  }
  // Also when the write that wakes the waiter came from a CPU op reading
  // GPU work, and when nothing is pending any more.
  engine_->PushSync([value](RunContext) { *value += 100; }, {}, {v});
  engine_->WaitForVar(v);
  EXPECT_EQ(*value, 105);
  engine_->WaitForVar(v);
}

// ...and not the GPU work of a write pushed after it: the waiter follows
// the fence of the write that woke it, not whatever the var holds by then.
TEST_P(GpuEngineTest, WaitForVarDoesNotWaitForTheGpuWorkOfLaterWrites) {
  Pinned<int> pinned_value(1);
  int* value = pinned_value.get();
  VarHandle v = engine_->NewVariable();
  auto store = [&](int stored, int delay_us) {
    engine_->PushAsync(
        [value, stored, delay_us](RunContext ctx, const OnStart& start, const OnComplete& done) {
          start();
          LaunchDelayedStore(static_cast<cudaStream_t>(ctx.stream), value, stored, delay_us);
          done();
        },
        {}, {v}, {.ctx = Context::GPU(0), .name = "store"});
  };
  store(1, 20'000);
  std::atomic<int> seen{-1};
  std::atomic<bool> returned{false};
  std::thread waiter([&] {
    engine_->WaitForVar(v);
    seen = *value;
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the waiter registers first
  store(2, 1'000'000);                                         // a 1 s kernel
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(600);
  while (!returned.load() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(returned.load()) << "WaitForVar waited for the kernel of a later write";
  waiter.join();
  EXPECT_EQ(seen.load(), 1);
  engine_->WaitForAll();
  EXPECT_EQ(*value, 2);
}

// ...nor for the GPU work of a pending read (in the Async engines a var
// keeps its readers' events, for the next write to wait on, not WaitForVar).
TEST_P(GpuEngineTest, WaitForVarDoesNotWaitForTheGpuWorkOfReads) {
  Pinned<int> pinned_value(1);
  int* value = pinned_value.get();
  VarHandle v = engine_->NewVariable();
  VarHandle out = engine_->NewVariable();
  std::atomic<bool> launched{false};
  // Pushed from a thread of its own: NaiveEngine runs the read on its pusher.
  std::thread pusher([&] {
    engine_->PushAsync(
        [value, &launched](RunContext ctx, const OnStart& start, const OnComplete& done) {
          start();
          LaunchDelayedStore(static_cast<cudaStream_t>(ctx.stream), value, 1, 1'000'000);
          launched = true;
          done();
        },
        {v}, {out}, {.ctx = Context::GPU(0), .name = "slow-read"});
  });
  while (!launched.load()) std::this_thread::yield();
  const auto begin = std::chrono::steady_clock::now();
  engine_->WaitForVar(v);
  const auto waited = std::chrono::steady_clock::now() - begin;
  EXPECT_LT(waited, std::chrono::milliseconds(500)) << "WaitForVar waited for a read's kernel";
  EXPECT_EQ(*value, 0) << "the read's 1 s kernel had already ended";
  pusher.join();
  engine_->WaitForVar(out);
  EXPECT_EQ(*value, 1);
}

TEST_P(GpuEngineTest, CopiesBothWaysThroughTheCopyWorkers) {
  Pinned<int> pinned_host(2);
  int* host = pinned_host.get();
  int* device = nullptr;
  CudaCheck(cudaMalloc(reinterpret_cast<void**>(&device), sizeof(int)), "cudaMalloc");
  host[0] = 17;
  VarHandle on_host = engine_->NewVariable();
  VarHandle on_device = engine_->NewVariable();
  VarHandle back = engine_->NewVariable();
  engine_->PushAsync(
      [=](RunContext ctx, const OnStart& start, const OnComplete& done) {
        start();
        CudaCheck(cudaMemcpyAsync(device, host, sizeof(int), cudaMemcpyHostToDevice,
                                  static_cast<cudaStream_t>(ctx.stream)),
                  "copy in");
        done();
      },
      {on_host}, {on_device}, {.ctx = Context::GPU(0), .prop = FnProperty::kCopyToGPU});
  engine_->PushAsync(
      [=](RunContext ctx, const OnStart& start, const OnComplete& done) {
        start();
        CudaCheck(cudaMemcpyAsync(&host[1], device, sizeof(int), cudaMemcpyDeviceToHost,
                                  static_cast<cudaStream_t>(ctx.stream)),
                  "copy out");
        done();
      },
      {on_device}, {back}, {.ctx = Context::GPU(0), .prop = FnProperty::kCopyFromGPU});
  engine_->WaitForVar(back);
  EXPECT_EQ(host[1], 17);
  engine_->WaitForAll();
  CudaCheck(cudaFree(device), "cudaFree");
}

TEST_P(GpuEngineTest, FailedLaunchIsTheOpsErrorAndTravels) {
  VarHandle a = engine_->NewVariable();
  VarHandle b = engine_->NewVariable();
  engine_->PushAsync(
      [](RunContext ctx, const OnStart& start, const OnComplete& done) {
        start();
        LaunchInvalid(static_cast<cudaStream_t>(ctx.stream));
        done();
      },
      {}, {a}, {.ctx = Context::GPU(0), .name = "bad-launch"});
  int ran = 0;
  engine_->PushSync([&](RunContext) { ++ran; }, {a}, {b});
  try {
    engine_->WaitForVar(b);
    FAIL() << "no exception";
  } catch (const CudaError& e) {
    EXPECT_THAT(e.what(), HasSubstr("kernel launch of op 'bad-launch'"));
  }
  EXPECT_EQ(ran, 0);
  // Reported once (through b, where the skipped reader passed it on): the
  // error poisons nothing after that, a included.
  EXPECT_NO_THROW(engine_->WaitForVar(a));
  int value = 0;
  engine_->PushSync([&](RunContext) { value = 1; }, {}, {a});  // still usable
  engine_->WaitForVar(a);
  EXPECT_EQ(value, 1);
}

// Two failed launches: the one WaitForVar reports does not hide the other
// from WaitForAll, and neither is reported twice.
TEST_P(GpuEngineTest, EveryFailedLaunchIsReportedOnce) {
  VarHandle a = engine_->NewVariable();
  VarHandle b = engine_->NewVariable();
  for (const auto& [var, name] : {std::pair{a, "bad-a"}, std::pair{b, "bad-b"}}) {
    engine_->PushAsync(
        [](RunContext ctx, const OnStart& start, const OnComplete& done) {
          start();
          LaunchInvalid(static_cast<cudaStream_t>(ctx.stream));
          done();
        },
        {}, {var}, {.ctx = Context::GPU(0), .name = name});
  }
  auto expect_failure = [](auto call, const std::string& op) {
    try {
      call();
      ADD_FAILURE() << "no exception for op '" << op << "'";
    } catch (const CudaError& e) {
      EXPECT_THAT(e.what(), HasSubstr("kernel launch of op '" + op + "'"));
    }
  };
  expect_failure([&] { engine_->WaitForVar(a); }, "bad-a");
  expect_failure([&] { engine_->WaitForAll(); }, "bad-b");
  EXPECT_NO_THROW(engine_->WaitForAll());
  EXPECT_NO_THROW(engine_->WaitForVar(b));
}

TEST_P(GpuEngineTest, GpuThatDoesNotExistIsUnavailable) {
  const int gpus = ember::GpuCount();
  VarHandle v = engine_->NewVariable();
  try {
    engine_->PushSync([](RunContext) {}, {}, {v}, {.ctx = Context::GPU(gpus), .name = "far"});
    FAIL() << "no exception";
  } catch (const Unavailable& e) {
    EXPECT_THAT(e.what(), HasSubstr("gpu(" + std::to_string(gpus) + ") is not available"));
  }
}

// Two 5 ms kernels on different vars overlap: measured by the GPU's own
// clock (each kernel stores its start and end times), not by the host's
// wall clock, so a slow host cannot make the test pass or fail. Each op
// holds its worker until the other has launched (for at most 2 s), so one
// worker cannot take both in turn onto its one stream.
TEST_P(GpuEngineTest, IndependentKernelsOnDifferentWorkersOverlap) {
  if (GetParam().type == EngineType::kNaive) GTEST_SKIP() << "NaiveEngine runs one op at a time";
  Pinned<uint64_t> pinned_times(4);
  uint64_t* times = pinned_times.get();
  VarHandle a = engine_->NewVariable();
  VarHandle b = engine_->NewVariable();
  // Round 0 warms up (the kernel's first launch loads it); round 1 counts.
  for (int round = 0; round < 2; ++round) {
    std::atomic<int> launched{0};
    for (int i = 0; i < 2; ++i) {
      engine_->PushAsync(
          [times, i, &launched](RunContext ctx, const OnStart& begin, const OnComplete& done) {
            begin();
            LaunchTimedSpin(static_cast<cudaStream_t>(ctx.stream), &times[2 * i], 5000);
            launched.fetch_add(1);
            const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(2);
            while (launched.load() < 2 && std::chrono::steady_clock::now() < give_up) {
              std::this_thread::yield();
            }
            done();
          },
          {}, {i == 0 ? a : b}, {.ctx = Context::GPU(0), .name = "5ms"});
    }
    engine_->WaitForAll();
  }
  const double overlap_ms = (static_cast<double>(std::min(times[1], times[3])) -
                             static_cast<double>(std::max(times[0], times[2]))) /
                            1e6;
  EXPECT_GT(overlap_ms, 2.5) << "two 5 ms kernels on different vars overlapped " << overlap_ms
                             << " ms on the GPU";
}

// A chain alternating normal and copy-in GPU ops: whichever worker launches
// an op (its own pool's, or one that made it ready, see worker_pool.h), copy
// ops run on copy-in streams and normal ops on normal streams, so copies
// still overlap compute.
TEST(GpuStreamsTest, OpsRunOnTheirPoolsStreamsWhoeverLaunchesThem) {
  if (ember::GpuCount() == 0) GTEST_SKIP() << "no CUDA device (or driver)";
  for (bool async : {false, true}) {
    EngineOptions options;
    options.async_gpu = async;
    auto engine = CreateEngine(options);
    std::vector<std::pair<FnProperty, void*>> seen;  // appended in chain order
    VarHandle v = engine->NewVariable();
    for (int i = 0; i < 200; ++i) {
      const FnProperty prop = i % 2 == 0 ? FnProperty::kNormal : FnProperty::kCopyToGPU;
      engine->PushSync([&seen, prop](RunContext ctx) { seen.emplace_back(prop, ctx.stream); }, {},
                       {v}, {.ctx = Context::GPU(0), .prop = prop, .name = "hop"});
    }
    engine->WaitForAll();
    std::set<void*> normal;
    std::set<void*> copy;
    for (const auto& [prop, stream] : seen) {
      (prop == FnProperty::kNormal ? normal : copy).insert(stream);
    }
    EXPECT_EQ(seen.size(), 200u);
    EXPECT_LE(copy.size(), 1u) << "one copy-in worker, one copy-in stream";
    for (void* stream : copy)
      EXPECT_EQ(normal.count(stream), 0u) << "a copy ran on a normal stream";
  }
}

// The CUDA priority of the stream each pool's ops run on, by FnProperty.
std::map<FnProperty, std::set<int>> PrioritiesByPool(const EngineOptions& options) {
  auto engine = CreateEngine(options);
  std::map<FnProperty, std::set<int>> seen;
  VarHandle v = engine->NewVariable();
  for (int i = 0; i < 60; ++i) {
    const FnProperty prop =
        std::array{FnProperty::kNormal, FnProperty::kCopyToGPU, FnProperty::kCopyFromGPU,
                   FnProperty::kGPUPrioritized}[i % 4];
    engine->PushSync(
        [&seen, prop](RunContext ctx) {
          int priority = 0;
          CudaCheck(cudaStreamGetPriority(static_cast<cudaStream_t>(ctx.stream), &priority),
                    "cudaStreamGetPriority");
          seen[prop].insert(priority);
        },
        {}, {v}, {.ctx = Context::GPU(0), .prop = prop, .name = "priority?"});
  }
  engine->WaitForAll();
  return seen;
}

// Copy pools' streams rank lowest, then the normal pool's, then the
// priority pool's (StreamRank), on the streams their ops run on (also when
// another pool's worker launches them), unless the option turns it off.
TEST(GpuStreamsTest, PoolsStreamsRunAtRankedPriorities) {
  if (ember::GpuCount() == 0) GTEST_SKIP() << "no CUDA device (or driver)";
  int least = 0;
  int greatest = 0;
  CudaCheck(cudaDeviceGetStreamPriorityRange(&least, &greatest), "priority range");
  if (least - greatest < 2) GTEST_SKIP() << "the device has fewer than 3 stream priorities";
  for (bool async : {false, true}) {
    EngineOptions options;
    options.async_gpu = async;
    const auto ranked = PrioritiesByPool(options);
    EXPECT_EQ(ranked.at(FnProperty::kCopyToGPU), std::set<int>{least});
    EXPECT_EQ(ranked.at(FnProperty::kCopyFromGPU), std::set<int>{least});
    EXPECT_EQ(ranked.at(FnProperty::kNormal), std::set<int>{least - 1});
    EXPECT_EQ(ranked.at(FnProperty::kGPUPrioritized), std::set<int>{least - 2});
    options.gpu_stream_priorities = false;
    for (const auto& [prop, priorities] : PrioritiesByPool(options))
      EXPECT_EQ(priorities, std::set<int>{least}) << "pool of property " << static_cast<int>(prop);
  }
}

// In the Async engines a GPU worker launches the GPU op it makes ready for
// another pool itself (worker_pool.h): a chain pushed behind a gate runs on
// one thread from start to end (nothing else is queued, so it never
// yields); the plain engines hand every hop to the other pool's worker.
TEST(GpuStreamsTest, AsyncWorkersLaunchTheChainTheyMakeReady) {
  if (ember::GpuCount() == 0) GTEST_SKIP() << "no CUDA device (or driver)";
  for (bool async : {false, true}) {
    EngineOptions options;
    options.async_gpu = async;
    auto engine = CreateEngine(options);
    VarHandle v = engine->NewVariable();
    ember::Notification gate;
    engine->PushSync([&gate](RunContext) { gate.WaitForNotification(); }, {}, {v},
                     {.name = "gate"});
    std::vector<std::thread::id> threads;  // appended in chain order
    for (int i = 0; i < 200; ++i) {
      const FnProperty prop = i % 2 == 0 ? FnProperty::kNormal : FnProperty::kCopyToGPU;
      engine->PushSync([&threads](RunContext) { threads.push_back(std::this_thread::get_id()); },
                       {}, {v}, {.ctx = Context::GPU(0), .prop = prop, .name = "hop"});
    }
    gate.Notify();
    engine->WaitForAll();
    int switches = 0;
    for (size_t i = 1; i < threads.size(); ++i) switches += threads[i] != threads[i - 1];
    if (async) {
      EXPECT_EQ(switches, 0) << "hops were handed between threads";
    } else {
      EXPECT_GE(switches, 199) << "a plain engine's worker took another pool's op";
    }
  }
}

// ThreadedEngine hands its set of streams (as many as workers) to GPU ops in
// turn; the other engines give each worker thread its own.
TEST(GpuStreamsTest, ThreadedEngineHandsOutItsStreamsRoundRobin) {
  if (ember::GpuCount() == 0) GTEST_SKIP() << "no CUDA device (or driver)";
  EngineOptions options;
  options.type = EngineType::kThreaded;
  options.pool_workers = 3;
  auto engine = CreateEngine(options);
  std::vector<void*> streams;  // appended by ops that all write `v`: serial
  VarHandle v = engine->NewVariable();
  for (int i = 0; i < 9; ++i) {
    engine->PushSync([&streams](RunContext ctx) { streams.push_back(ctx.stream); }, {}, {v},
                     {.ctx = Context::GPU(0), .name = "stream?"});
  }
  engine->WaitForAll();
  ASSERT_EQ(streams.size(), 9u);
  for (int i = 0; i < 9; ++i) EXPECT_EQ(streams[i], streams[i % 3]) << "op " << i;
  EXPECT_NE(streams[0], streams[1]);
  EXPECT_NE(streams[1], streams[2]);
  EXPECT_NE(streams[0], streams[2]);
}

TEST(GpuProfileTest, GpuSpansGoOnStreamRowsTimedByEvents) {
  if (ember::GpuCount() == 0) GTEST_SKIP() << "no CUDA device (or driver)";
  const std::string path = ::testing::TempDir() + "ember_gpu_profile_test.json";
  Pinned<int> pinned_value(1);
  int* value = pinned_value.get();
  {
    EngineOptions options;
    options.async_gpu = true;
    options.profile_path = path;
    auto engine = CreateEngine(options);
    VarHandle v = engine->NewVariable();
    engine->PushAsync(
        [value](RunContext ctx, const OnStart& start, const OnComplete& done) {
          start();
          LaunchDelayedStore(static_cast<cudaStream_t>(ctx.stream), value, 1, 2000);
          done();
        },
        {}, {v}, {.ctx = Context::GPU(0), .name = "two-ms-kernel"});
    engine->PushSync([](RunContext) {}, {v}, {}, {.name = "cpu-reader"});
    engine->WaitForAll();
  }
  std::ifstream in(path);
  const std::string trace((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(trace, HasSubstr(R"("args":{"name":"gpu0 stream 0"})"));
  EXPECT_THAT(trace, HasSubstr(R"("name":"two-ms-kernel","cat":"gpu")"));
  EXPECT_THAT(trace, HasSubstr(R"("name":"host wait: cpu-reader","cat":"host-wait")"));
  // The GPU span lasts the kernel's 2 ms, not the microseconds of its launch.
  const size_t span = trace.find(R"("name":"two-ms-kernel","cat":"gpu")");
  ASSERT_NE(span, std::string::npos);
  const size_t dur = trace.find("\"dur\":", span);
  EXPECT_GT(std::stod(trace.substr(dur + 6)), 1500.0);
}

INSTANTIATE_TEST_SUITE_P(AllEngines, GpuEngineTest,
                         ::testing::Values(GpuCase{EngineType::kNaive, false},
                                           GpuCase{EngineType::kNaive, true},
                                           GpuCase{EngineType::kThreaded, false},
                                           GpuCase{EngineType::kThreaded, true},
                                           GpuCase{EngineType::kThreadedPerDevice, false},
                                           GpuCase{EngineType::kThreadedPerDevice, true},
                                           GpuCase{EngineType::kThreaded, true, 2},
                                           GpuCase{EngineType::kThreadedPerDevice, true, 2}),
                         GpuCaseName);

}  // namespace
}  // namespace ember::engine::testing
