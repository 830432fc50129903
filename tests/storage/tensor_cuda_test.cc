// Tensor on the GPU, for every engine type, plain and Async: copies through
// the copy workers are exact, pinned and UVM tensors work as sources and
// destinations, waits see slow GPU work, and buffers freed under pending GPU
// work are reused (across streams) only after it. Skipped without a CUDA
// device.

#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/error.h"
#include "storage/storage.h"
#include "storage/tensor.h"
#include "tests/engine/cuda/test_kernels.h"

namespace ember::storage {
namespace {

using engine::Context;
using engine::FnProperty;
using engine::OnComplete;
using engine::OnStart;
using engine::RunContext;

int DeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

std::vector<int32_t> RandomInts(std::mt19937& rng, std::size_t n) {
  std::vector<int32_t> values(n);
  for (int32_t& v : values) v = static_cast<int32_t>(rng());
  return values;
}

class TensorCudaTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    gpus_ = DeviceCount();
    if (gpus_ == 0) GTEST_SKIP() << "no CUDA device";
    cpu_ = CreateStorageManager(MemoryKind::kCpu, -1, {});
    pinned_ = CreateStorageManager(MemoryKind::kPinned, -1, {});
    device_ = CreateStorageManager(MemoryKind::kDevice, 0, {});
    uvm_ = CreateStorageManager(MemoryKind::kUvm, 0, {});
    engine::EngineOptions options = engine::ParseEngineType(GetParam());
    options.cpu_workers = 2;
    options.pool_workers = 4;
    engine_ = engine::CreateEngine(options);
  }

  Tensor Make(StorageManager& manager, int64_t n, Context ctx) {
    return Tensor::Empty(*engine_, manager, {n}, DType::kI32, ctx);
  }
  Tensor OnGpu(StorageManager& manager, int64_t n) { return Make(manager, n, Context::GPU(0)); }
  // A host tensor holding `values`, written by this thread after a wait.
  Tensor Filled(StorageManager& manager, const std::vector<int32_t>& values) {
    Tensor t = Make(manager, static_cast<int64_t>(values.size()), Context::CPU());
    t.WaitToWrite();
    std::copy(values.begin(), values.end(), t.data<int32_t>());
    return t;
  }
  static std::vector<int32_t> Read(const Tensor& t) {
    t.WaitToRead();
    const int32_t* data = t.data<int32_t>();
    return {data, data + t.numel()};
  }
  // Pushes a GPU op writing `t` that stores `value` at `index` after a delay.
  void PushDelayedStore(const Tensor& t, int64_t index, int32_t value, int delay_us,
                        FnProperty prop = FnProperty::kNormal) {
    int32_t* target = t.data<int32_t>() + index;
    engine_->PushAsync(
        [=](RunContext rc, const OnStart& start, const OnComplete& done) {
          start();
          engine::testing::LaunchDelayedStore(static_cast<cudaStream_t>(rc.stream), target, value,
                                              delay_us);
          done();
        },
        {}, {t.var()}, {.ctx = Context::GPU(0), .prop = prop, .name = "delayed-store"});
  }

  int gpus_ = 0;
  // Declared before the engine, so that they outlive its pending deletions.
  std::unique_ptr<StorageManager> cpu_, pinned_, device_, uvm_;
  std::unique_ptr<engine::Engine> engine_;
};

TEST_P(TensorCudaTest, CpuGpuGpuCpuRoundTripIsExact) {
  std::mt19937 rng(1);
  const std::vector<int32_t> values = RandomInts(rng, std::size_t{256} * 1024);  // 1 MiB
  Tensor src = Filled(*cpu_, values);
  Tensor a = OnGpu(*device_, src.numel());
  Tensor b = OnGpu(*device_, src.numel());
  Tensor dst = Make(*cpu_, src.numel(), Context::CPU());
  src.CopyTo(a);  // copy-in workers
  a.CopyTo(b);    // the GPU's normal workers
  b.CopyTo(dst);  // copy-out workers
  EXPECT_EQ(Read(dst), values);
}

TEST_P(TensorCudaTest, PeerCopyBetweenTwoGpusIsExact) {
  if (gpus_ < 2) GTEST_SKIP() << "needs two GPUs";
  auto device1 = CreateStorageManager(MemoryKind::kDevice, 1, {});
  std::mt19937 rng(2);
  const std::vector<int32_t> values = RandomInts(rng, std::size_t{64} * 1024);
  Tensor src = Filled(*pinned_, values);
  Tensor on0 = OnGpu(*device_, src.numel());
  Tensor on1 = Make(*device1, src.numel(), Context::GPU(1));
  Tensor back = OnGpu(*device_, src.numel());
  Tensor dst = Make(*pinned_, src.numel(), Context::CPU());
  src.CopyTo(on0);
  on0.CopyTo(on1);  // gpu(0)'s copy-out workers, a peer copy
  on1.CopyTo(back);
  back.CopyTo(dst);
  EXPECT_EQ(Read(dst), values);
  on1 = Tensor();
  engine_->WaitForAll();  // device1's deletions run before it goes
}

// An engine that names GPU 1 for its host memory (a sharded run's rank 1)
// takes its pinned tensors from GPU 1's pinned pool, not GPU 0's, and its
// copies through GPU 1 stay exact, also for a block reused after a copy.
TEST_P(TensorCudaTest, PinnedMemoryOfAnEngineOnGpu1ComesFromGpu1sPool) {
  if (gpus_ < 2) GTEST_SKIP() << "needs two GPUs";
  auto device1 = CreateStorageManager(MemoryKind::kDevice, 1, {});
  engine::EngineOptions options = engine::ParseEngineType(GetParam());
  options.host_memory_gpu = 1;
  auto engine = engine::CreateEngine(options);  // goes first: its deletions use device1
  const std::size_t gpu0_before = GetStorage(MemoryKind::kPinned, 0).Stats().allocations;
  const std::size_t gpu1_before = GetStorage(MemoryKind::kPinned, 1).Stats().allocations;
  std::mt19937 rng(5);
  for (int round = 0; round < 3; ++round) {
    const std::vector<int32_t> values = RandomInts(rng, std::size_t{64} * 1024);
    const auto n = static_cast<int64_t>(values.size());
    Tensor src = Tensor::Empty(*engine, {n}, DType::kI32, Context::CPU(), MemoryKind::kPinned);
    src.WaitToWrite();
    std::copy(values.begin(), values.end(), src.data<int32_t>());
    Tensor on1 = Tensor::Empty(*engine, *device1, {n}, DType::kI32, Context::GPU(1));
    Tensor dst = Tensor::Empty(*engine, {n}, DType::kI32, Context::CPU(), MemoryKind::kPinned);
    src.CopyTo(on1);
    on1.CopyTo(dst);
    EXPECT_EQ(Read(dst), values) << "round " << round;
  }  // the next round's tensors reuse these blocks, after their fences
  engine->WaitForAll();
  EXPECT_EQ(GetStorage(MemoryKind::kPinned, 0).Stats().allocations, gpu0_before);
  EXPECT_EQ(GetStorage(MemoryKind::kPinned, 1).Stats().allocations, gpu1_before + 6);
}

TEST_P(TensorCudaTest, PinnedPoolOfAGpuTheMachineLacksIsRefused) {
  EXPECT_THAT([this] { (void)GetStorage(MemoryKind::kPinned, gpus_); },
              ::testing::ThrowsMessage<Unavailable>(
                  ::testing::HasSubstr("[GetStorage] pinned memory on gpu(")));
}

TEST_P(TensorCudaTest, PinnedAndUvmTensorsRoundTrip) {
  std::mt19937 rng(3);
  const std::vector<int32_t> values = RandomInts(rng, std::size_t{64} * 1024);
  Tensor src = Filled(*pinned_, values);
  Tensor uvm = OnGpu(*uvm_, src.numel());
  Tensor dev = OnGpu(*device_, src.numel());
  Tensor dst = Make(*pinned_, src.numel(), Context::CPU());
  EXPECT_EQ(uvm.kind(), MemoryKind::kUvm);
  EXPECT_EQ(dst.kind(), MemoryKind::kPinned);
  src.CopyTo(uvm);
  uvm.CopyTo(dev);
  dev.CopyTo(dst);
  EXPECT_EQ(Read(dst), values);
  EXPECT_EQ(Read(uvm), values);  // the host reads UVM memory once its writer finished
}

TEST_P(TensorCudaTest, WaitToReadSeesASlowGpuWrite) {
  Tensor t = Filled(*pinned_, {0});
  PushDelayedStore(t, 0, 42, 20000);
  EXPECT_EQ(Read(t), std::vector<int32_t>{42});
}

TEST_P(TensorCudaTest, WaitToWriteWaitsForASlowGpuRead) {
  Tensor a = Filled(*pinned_, {7});
  Tensor b = OnGpu(*device_, 1);
  const int32_t* from = a.data<int32_t>();
  int32_t* to = b.data<int32_t>();
  engine_->PushAsync(
      [=](RunContext rc, const OnStart& start, const OnComplete& done) {
        start();
        engine::testing::LaunchDelayedCopy(static_cast<cudaStream_t>(rc.stream), from, to, 20000);
        done();
      },
      {a.var()}, {b.var()}, {.ctx = Context::GPU(0), .name = "delayed-read"});
  a.WaitToWrite();
  a.data<int32_t>()[0] = 99;  // lands before the GPU read unless WaitToWrite waited
  Tensor c = Make(*pinned_, 1, Context::CPU());
  b.CopyTo(c);
  EXPECT_EQ(Read(c), std::vector<int32_t>{7});
}

// Many tensors written by slow GPU ops on random workers (so streams), then
// freed and their buffers handed out again at once: a reuse that did not
// wait for the old owner's work would let its late store overwrite the new
// owner's data, and a checked value would be stale.
TEST_P(TensorCudaTest, ReusedBuffersNeverShowStaleValues) {
  constexpr FnProperty kProps[] = {FnProperty::kNormal, FnProperty::kCopyToGPU,
                                   FnProperty::kCopyFromGPU, FnProperty::kGPUPrioritized};
  struct Check {
    Tensor out;
    std::vector<int32_t> expected;
  };
  std::mt19937 rng(4);
  std::deque<Check> window;
  for (int i = 0; i < 300; ++i) {
    const int64_t n = int64_t{256} << (rng() % 4);  // 1 to 8 KiB: few size classes
    std::vector<int32_t> values = RandomInts(rng, static_cast<std::size_t>(n));
    Tensor src = Filled(rng() % 2 ? *pinned_ : *cpu_, values);
    Tensor dev = OnGpu(i % 4 == 0 ? *uvm_ : *device_, n);
    src.CopyTo(dev);
    const int64_t index = static_cast<int64_t>(rng() % n);
    values[index] = -i - 1;
    PushDelayedStore(dev, index, values[index], static_cast<int>(rng() % 400), kProps[rng() % 4]);
    Tensor out = Make(rng() % 2 ? *pinned_ : *cpu_, n, Context::CPU());
    dev.CopyTo(out);
    window.push_back({std::move(out), std::move(values)});
    if (window.size() > 6) {
      ASSERT_EQ(Read(window.front().out), window.front().expected) << "iteration " << i - 6;
      window.pop_front();
    }
  }
  for (const Check& check : window) EXPECT_EQ(Read(check.out), check.expected);
  window.clear();
  engine_->WaitForAll();
  const MemoryStats device = device_->Stats();
  EXPECT_LT(device.system_allocations, device.allocations) << "no buffer was reused";
  EXPECT_LT(pinned_->Stats().system_allocations, pinned_->Stats().allocations);
}

INSTANTIATE_TEST_SUITE_P(AllEngines, TensorCudaTest,
                         ::testing::Values("NaiveEngine", "ThreadedEngine",
                                           "ThreadedEnginePerDevice", "NaiveEngineAsync",
                                           "ThreadedEngineAsync", "ThreadedEnginePerDeviceAsync"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace ember::storage
