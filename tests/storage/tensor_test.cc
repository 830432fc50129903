// Tensor on the CPU, for every engine type: shapes and dtypes, the misuse
// errors, copies pushed through the engine, WaitToRead/WaitToWrite ordering
// and deletion deferred until the ops on the tensor have finished.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/error.h"
#include "storage/dtype.h"
#include "storage/storage.h"
#include "storage/tensor.h"

namespace ember::storage {
namespace {

using engine::Context;
using engine::RunContext;
using std::chrono::milliseconds;

// Expects `fn` to throw E with every one of `parts` in its message.
template <typename E>
void ExpectThrowWith(const std::function<void()>& fn, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "no exception thrown";
  } catch (const E& e) {
    for (const std::string& part : parts) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "'" << e.what() << "' lacks '" << part << "'";
    }
  }
}

// Host memory that counts the bytes handed out, and poisons a block when it
// comes back (keeping it until the manager dies), so that a read after the
// free shows as a wrong value without undefined behavior.
class CountingManager final : public StorageManager {
 public:
  CountingManager() : StorageManager(MemoryKind::kCpu, -1) {}
  ~CountingManager() override {
    for (void* block : returned_) ::operator delete(block);
  }
  [[nodiscard]] std::size_t live() const { return live_.load(); }
  [[nodiscard]] MemoryStats Stats() const override { return {.allocated = live()}; }
  void ResetPeaks() override {}
  void ReleaseCached() override {}

 protected:
  Block Take(std::size_t bytes, void* /*stream*/) override {
    live_ += bytes;
    return {::operator new(bytes), bytes, {}};
  }
  void Give(Block block) override {
    std::memset(block.data, 0xAB, block.capacity);
    std::lock_guard<std::mutex> lock(mu_);
    returned_.push_back(block.data);
    live_ -= block.capacity;
  }

 private:
  std::atomic<std::size_t> live_{0};
  std::mutex mu_;
  std::vector<void*> returned_;  // guarded by mu_
};

class TensorTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    engine::EngineOptions options = engine::ParseEngineType(GetParam());
    options.cpu_workers = 2;
    options.pool_workers = 2;
    engine_ = engine::CreateEngine(options);
  }

  Tensor Make(std::vector<int64_t> shape, DType dtype = DType::kF32) {
    return Tensor::Empty(*engine_, manager_, std::move(shape), dtype, Context::CPU());
  }
  // A 1-d i32 tensor holding `values`, written by this thread after a wait.
  Tensor MakeFilled(const std::vector<int32_t>& values) {
    Tensor t = Make({static_cast<int64_t>(values.size())}, DType::kI32);
    t.WaitToWrite();
    std::copy(values.begin(), values.end(), t.data<int32_t>());
    return t;
  }
  static std::vector<int32_t> Read(const Tensor& t) {
    t.WaitToRead();
    const int32_t* data = t.data<int32_t>();
    return {data, data + t.numel()};
  }
  // Pushes an op reading `t` that sleeps, then records the first element and
  // the manager's live bytes.
  void PushSlowRead(const Tensor& t, int32_t* seen, std::size_t* live_seen) {
    const int32_t* data = t.data<int32_t>();
    engine_->PushSync(
        [this, data, seen, live_seen](RunContext) {
          std::this_thread::sleep_for(milliseconds(50));
          *seen = data[0];
          *live_seen = manager_.live();
        },
        {t.var()}, {}, {.name = "slow-read"});
  }

  // Declared first so that it outlives the engine's pending deletions.
  CountingManager manager_;
  std::unique_ptr<engine::Engine> engine_;
};

TEST(DTypeTest, SizesAndNames) {
  EXPECT_EQ(SizeOf(DType::kF32), 4u);
  EXPECT_EQ(SizeOf(DType::kF16), 2u);
  EXPECT_EQ(SizeOf(DType::kBF16), 2u);
  EXPECT_EQ(SizeOf(DType::kI32), 4u);
  EXPECT_EQ(SizeOf(DType::kI64), 8u);
  EXPECT_EQ(ToString(DType::kF32), "f32");
  EXPECT_EQ(ToString(DType::kF16), "f16");
  EXPECT_EQ(ToString(DType::kBF16), "bf16");
  EXPECT_EQ(ToString(DType::kI32), "i32");
  EXPECT_EQ(ToString(DType::kI64), "i64");
  static_assert(kDTypeOf<BFloat16> == DType::kBF16 && kDTypeOf<int64_t> == DType::kI64);
}

TEST_P(TensorTest, EmptyHasShapeDtypeAndBytes) {
  Tensor t = Make({2, 3, 4});
  EXPECT_EQ(t.shape(), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(t.dtype(), DType::kF32);
  EXPECT_EQ(t.ctx(), Context::CPU());
  EXPECT_EQ(t.kind(), MemoryKind::kCpu);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.bytes(), 96u);
  EXPECT_NE(t.data(), nullptr);
  EXPECT_FALSE(t.var().is_null());
  EXPECT_EQ(&t.engine(), engine_.get());
  EXPECT_EQ(manager_.live(), 96u);

  EXPECT_EQ(Make({5}, DType::kI64).bytes(), 40u);
  EXPECT_EQ(Make({3}, DType::kF16).bytes(), 6u);
  EXPECT_EQ(Make({}, DType::kI32).numel(), 1);  // a scalar
  Tensor none = Make({3, 0}, DType::kBF16);
  EXPECT_EQ(none.numel(), 0);
  EXPECT_EQ(none.bytes(), 0u);
  EXPECT_EQ(none.data(), nullptr);
}

TEST_P(TensorTest, EmptyFromTheProcessWideManagerDefaultsToCpuMemory) {
  Tensor t = Tensor::Empty(*engine_, {7}, DType::kI64, Context::CPU());
  EXPECT_EQ(t.kind(), MemoryKind::kCpu);
  EXPECT_EQ(t.bytes(), 56u);
  t.WaitToWrite();
  t.data<int64_t>()[6] = 1;  // the memory is there
}

TEST_P(TensorTest, NegativeDimIsInvalidArgument) {
  ExpectThrowWith<InvalidArgument>(
      [&] {
        (void)Make({2, -3});
      },
      {"[Tensor::Empty]", "[2, -3]", "negative"});
  EXPECT_EQ(manager_.live(), 0u);
}

TEST_P(TensorTest, ByteSizeOverflowIsInvalidArgument) {
  const int64_t big = int64_t{1} << 40;
  ExpectThrowWith<InvalidArgument>(
      [&] {
        (void)Make({big, big});
      },
      {"[Tensor::Empty]", "overflows", "[1099511627776, 1099511627776]"});
  // The element count fits an int64_t, its bytes do not fit a size_t.
  ExpectThrowWith<InvalidArgument>([&] { (void)Make({int64_t{1} << 62}); }, {"overflows", "f32"});
}

TEST_P(TensorTest, KindMustLiveOnTheContext) {
  ExpectThrowWith<InvalidArgument>(
      [&] { (void)Tensor::Empty(*engine_, {4}, DType::kF32, Context::CPU(), MemoryKind::kDevice); },
      {"[Tensor::Empty]", "device", "cpu"});
  ExpectThrowWith<InvalidArgument>(
      [&] { (void)Tensor::Empty(*engine_, {4}, DType::kF32, Context::CPU(), MemoryKind::kUvm); },
      {"uvm"});
  ExpectThrowWith<InvalidArgument>(
      [&] { (void)Tensor::Empty(*engine_, manager_, {4}, DType::kF32, Context::GPU(0)); },
      {"cpu", "gpu(0)"});
}

TEST_P(TensorTest, DataOfAnotherTypeIsInvalidArgument) {
  Tensor t = Make({2, 2});
  EXPECT_EQ(t.data<float>(), t.data());
  ExpectThrowWith<InvalidArgument>([&] { (void)t.data<int32_t>(); },
                                   {"[Tensor::data]", "[2, 2]", "f32", "i32"});
  ExpectThrowWith<InvalidArgument>([&] { (void)t.data<Float16>(); }, {"f16"});
}

TEST_P(TensorTest, MovedFromTensorIsEmpty) {
  Tensor a = Make({4});
  const engine::VarHandle var = a.var();
  Tensor b = std::move(a);
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): the state a move leaves
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(b.var(), var);
  ExpectThrowWith<UsageError>([&] { a.WaitToRead(); }, {"[Tensor::WaitToRead]", "empty"});
  ExpectThrowWith<UsageError>([&] { a.CopyTo(b); }, {"[Tensor::CopyTo]"});
}

TEST_P(TensorTest, MoveAssignmentDeletesTheOverwrittenTensor) {
  Tensor a = Make({100}, DType::kI32);
  Tensor b = Make({10}, DType::kI32);
  EXPECT_EQ(manager_.live(), 440u);
  a = std::move(b);
  engine_->WaitForAll();
  EXPECT_EQ(manager_.live(), 40u);
  EXPECT_EQ(a.numel(), 10);
}

TEST_P(TensorTest, CopyBetweenHostTensorsRunsOnTheEngine) {
  std::vector<int32_t> values(1000);
  std::iota(values.begin(), values.end(), -17);
  Tensor src = MakeFilled(values);
  Tensor mid = Make({10, 100}, DType::kI32);  // same numel, another shape
  Tensor dst = Make({1000}, DType::kI32);
  src.CopyTo(mid);
  mid.CopyTo(dst);
  EXPECT_EQ(Read(dst), values);
  EXPECT_EQ(engine_->VarVersion(dst.var()), 1u);  // one write: the copy op
}

TEST_P(TensorTest, CopyOfAnotherNumelOrDtypeIsInvalidArgument) {
  Tensor src = Make({2, 3});
  Tensor longer = Make({7});
  Tensor ints = Make({6}, DType::kI32);
  ExpectThrowWith<InvalidArgument>([&] { src.CopyTo(longer); },
                                   {"[Tensor::CopyTo]", "[2, 3]", "[7]"});
  ExpectThrowWith<InvalidArgument>([&] { src.CopyTo(ints); }, {"[2, 3] f32", "[6] i32"});
  ExpectThrowWith<InvalidArgument>([&] { src.CopyTo(src); }, {"same tensor"});
  auto other_engine = engine::CreateEngine(engine::ParseEngineType("NaiveEngine"));
  Tensor foreign = Tensor::Empty(*other_engine, manager_, {6}, DType::kF32, Context::CPU());
  ExpectThrowWith<InvalidArgument>([&] { src.CopyTo(foreign); }, {"two engines"});
  foreign = Tensor();
  other_engine->WaitForAll();
}

TEST_P(TensorTest, WaitToReadSeesTheWriteOfASlowOp) {
  Tensor t = MakeFilled({1});
  int32_t* data = t.data<int32_t>();
  engine_->PushSync(
      [data](RunContext) {
        std::this_thread::sleep_for(milliseconds(50));
        data[0] = 42;
      },
      {}, {t.var()}, {.name = "slow-write"});
  t.WaitToRead();
  EXPECT_EQ(data[0], 42);
}

TEST_P(TensorTest, WaitToReadRethrowsTheWritersError) {
  Tensor t = Make({1});
  engine_->PushSync([](RunContext) { throw std::runtime_error("writer failed"); }, {}, {t.var()});
  ExpectThrowWith<std::runtime_error>([&] { t.WaitToRead(); }, {"writer failed"});
}

TEST_P(TensorTest, WaitToWriteWaitsForPendingReads) {
  Tensor t = MakeFilled({7});
  int32_t seen = -1;
  std::size_t live_seen = 0;
  PushSlowRead(t, &seen, &live_seen);
  t.WaitToWrite();
  t.data<int32_t>()[0] = 99;  // a write racing the read would show here
  engine_->WaitForAll();
  EXPECT_EQ(seen, 7);
  EXPECT_EQ(Read(t), std::vector<int32_t>{99});
}

TEST_P(TensorTest, DeletionWaitsForPendingOps) {
  int32_t seen = -1;
  std::size_t live_seen = 0;
  {
    Tensor t = MakeFilled({5, 6, 7});
    PushSlowRead(t, &seen, &live_seen);
  }  // deleted here, with the read still sleeping (threaded engines)
  engine_->WaitForAll();
  EXPECT_EQ(seen, 5) << "the op read freed (poisoned) memory";
  EXPECT_EQ(live_seen, 12u) << "the buffer was freed before the op ran";
  EXPECT_EQ(manager_.live(), 0u) << "the deletion did not free the buffer";
}

// The same with the storage layer's own CPU manager and its statistics.
TEST_P(TensorTest, CpuManagerStatsDropOnlyAfterTheOpsRan) {
  auto cpu = CreateStorageManager(MemoryKind::kCpu, -1, StorageOptions{});
  std::size_t allocated_seen = 0;
  {
    Tensor t = Tensor::Empty(*engine_, *cpu, {1024}, DType::kF32, Context::CPU());
    EXPECT_GE(cpu->Stats().allocated, 4096u);
    engine_->PushSync(
        [&allocated_seen, &cpu](RunContext) {
          std::this_thread::sleep_for(milliseconds(50));
          allocated_seen = cpu->Stats().allocated;
        },
        {t.var()}, {}, {.name = "slow-read"});
  }
  engine_->WaitForAll();
  EXPECT_GE(allocated_seen, 4096u);
  EXPECT_EQ(cpu->Stats().allocated, 0u);
}

// Tensors made, copied into one another and dropped at random; every copy
// must carry the values of its source at push time.
TEST_P(TensorTest, RandomCopiesAndDeletionsKeepValues) {
  std::mt19937 rng(7);
  std::vector<Tensor> live;
  std::vector<std::vector<int32_t>> expected;
  for (int step = 0; step < 300; ++step) {
    const int pick = static_cast<int>(rng() % 3);
    if (live.empty() || pick == 0) {
      std::vector<int32_t> values(16);
      for (int32_t& v : values) v = static_cast<int32_t>(rng());
      live.push_back(MakeFilled(values));
      expected.push_back(values);
    } else if (pick == 1) {
      const std::size_t from = rng() % live.size();
      live.push_back(Make({16}, DType::kI32));
      live[from].CopyTo(live.back());
      expected.push_back(expected[from]);
    } else {
      const std::size_t gone = rng() % live.size();
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(gone));
      expected.erase(expected.begin() + static_cast<std::ptrdiff_t>(gone));
    }
  }
  for (std::size_t i = 0; i < live.size(); ++i) EXPECT_EQ(Read(live[i]), expected[i]) << i;
  live.clear();
  engine_->WaitForAll();
  EXPECT_EQ(manager_.live(), 0u);
}

INSTANTIATE_TEST_SUITE_P(AllEngines, TensorTest,
                         ::testing::Values("NaiveEngine", "ThreadedEngine",
                                           "ThreadedEnginePerDevice"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace ember::storage
