// Storage managers on the CPU: the aligned CPU manager, the caching pool
// (over a fake system allocator, so reuse, statistics, the reserve and
// out-of-memory handling are checked without a GPU), options and errors.

#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/error.h"
#include "storage/internal/caching_pool.h"
#include "storage/storage.h"

namespace ember::storage {
namespace {

using ::testing::HasSubstr;

// System memory with a byte limit: plain malloc underneath.
class FakeSystem final : public internal::SystemMemory {
 public:
  struct Log {
    std::size_t in_use = 0;
    int allocations = 0;
    int frees = 0;
  };
  FakeSystem(std::size_t limit, std::size_t reserve, Log* log)
      : limit_(limit), reserve_(reserve), log_(log) {}
  void* Allocate(std::size_t bytes) override {
    if (log_->in_use + bytes > limit_) return nullptr;
    log_->in_use += bytes;
    ++log_->allocations;
    void* data = std::malloc(bytes);
    sizes_[data] = bytes;
    return data;
  }
  void Free(void* data) override {
    log_->in_use -= sizes_.at(data);
    sizes_.erase(data);
    ++log_->frees;
    std::free(data);
  }
  std::string Describe() const override { return "fake system: " + std::to_string(limit_) + " B"; }
  bool WouldCrossReserve(std::size_t bytes) const override {
    return log_->in_use + bytes + reserve_ > limit_;
  }

 private:
  const std::size_t limit_;
  const std::size_t reserve_;
  Log* const log_;
  std::map<void*, std::size_t> sizes_;
};

std::unique_ptr<StorageManager> FakePool(std::size_t limit, FakeSystem::Log* log,
                                         std::size_t reserve = 0) {
  return std::make_unique<internal::CachingPool>(MemoryKind::kDevice, 0,
                                                 internal::SizeClasses::Round(4096, 20),
                                                 std::make_unique<FakeSystem>(limit, reserve, log));
}

TEST(CpuStorageTest, BuffersAreAlignedAndCounted) {
  auto cpu = CreateStorageManager(MemoryKind::kCpu, -1, StorageOptions{});
  Buffer a = cpu->Alloc(100);
  Buffer b = cpu->Alloc(1000);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.data()) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data()) % 64, 0u);
  EXPECT_EQ(a.size(), 100u);
  EXPECT_EQ(a.capacity(), 128u);
  EXPECT_EQ(a.kind(), MemoryKind::kCpu);
  std::fill_n(static_cast<char*>(b.data()), 1000, 'x');  // ASan checks the extent
  MemoryStats stats = cpu->Stats();
  EXPECT_EQ(stats.allocated, 128u + 1024u);
  EXPECT_EQ(stats.reserved, 128u + 1024u);
  a.Reset();
  EXPECT_FALSE(a);
  stats = cpu->Stats();
  EXPECT_EQ(stats.allocated, 1024u);
  EXPECT_EQ(stats.peak_allocated, 128u + 1024u);
  cpu->ResetPeaks();
  EXPECT_EQ(cpu->Stats().peak_allocated, 1024u);
}

TEST(CpuStorageTest, ZeroBytesGiveAnEmptyBufferAndMovesTransferOwnership) {
  auto cpu = CreateStorageManager(MemoryKind::kCpu, -1, StorageOptions{});
  EXPECT_FALSE(cpu->Alloc(0));
  Buffer a = cpu->Alloc(64);
  void* data = a.data();
  Buffer b = std::move(a);
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
  EXPECT_EQ(b.data(), data);
  Buffer c = cpu->Alloc(64);
  c = std::move(b);  // c's own memory goes back
  EXPECT_EQ(c.data(), data);
  EXPECT_EQ(cpu->Stats().allocated, 64u);
}

TEST(CpuStorageTest, ImpossibleSizeIsOutOfMemoryWithTheSize) {
  auto cpu = CreateStorageManager(MemoryKind::kCpu, -1, StorageOptions{});
  try {
    cpu->Alloc(std::size_t{1} << 62);
    FAIL() << "no OutOfMemory";
  } catch (const OutOfMemory& e) {
    EXPECT_THAT(e.what(), HasSubstr(std::to_string(std::size_t{1} << 62)));
  }
  EXPECT_EQ(cpu->Stats().allocated, 0u);
}

TEST(CachingPoolTest, ReleasedBlocksAreReusedBySizeClass) {
  FakeSystem::Log log;
  auto pool = FakePool(1 << 30, &log);
  for (int i = 0; i < 100; ++i) {
    Buffer a = pool->Alloc(5000);   // class 8 KiB
    Buffer b = pool->Alloc(70000);  // class 128 KiB
  }
  EXPECT_EQ(log.allocations, 2);
  const MemoryStats stats = pool->Stats();
  EXPECT_EQ(stats.allocated, 0u);
  EXPECT_EQ(stats.reserved, 8192u + 131072u);
  EXPECT_EQ(stats.peak_allocated, 8192u + 131072u);
  EXPECT_EQ(stats.allocations, 200u);
  EXPECT_EQ(stats.system_allocations, 2u);
  pool->ReleaseCached();
  EXPECT_EQ(pool->Stats().reserved, 0u);
  EXPECT_EQ(log.frees, 2);
  EXPECT_EQ(log.in_use, 0u);
}

// Statistics follow a random sequence of allocations and releases exactly.
TEST(CachingPoolTest, StatisticsMatchTheAllocationsMade) {
  FakeSystem::Log log;
  auto pool = FakePool(std::size_t{1} << 34, &log);
  const internal::SizeClasses classes = internal::SizeClasses::Round(4096, 20);
  std::mt19937 rng(11);
  std::vector<Buffer> live;
  std::size_t allocated = 0;
  std::size_t peak = 0;
  for (int step = 0; step < 2000; ++step) {
    if (live.empty() || rng() % 3 != 0) {
      const std::size_t bytes = 1 + rng() % (3 << 20);
      live.push_back(pool->Alloc(bytes));
      allocated += classes.Round(bytes);
      peak = std::max(peak, allocated);
    } else {
      const std::size_t i = rng() % live.size();
      allocated -= live[i].capacity();
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    }
    const MemoryStats stats = pool->Stats();
    ASSERT_EQ(stats.allocated, allocated) << "step " << step;
    ASSERT_EQ(stats.peak_allocated, peak) << "step " << step;
    ASSERT_EQ(stats.reserved, log.in_use) << "step " << step;
    ASSERT_GE(stats.reserved, stats.allocated);
  }
}

TEST(CachingPoolTest, OutOfMemoryReleasesTheCacheAndRetries) {
  FakeSystem::Log log;
  auto pool = FakePool(1 << 20, &log);  // 1 MiB in all
  { Buffer a = pool->Alloc(600'000); }  // cached, 1 MiB class
  Buffer b = pool->Alloc(300'000);      // needs the cached block given back
  EXPECT_TRUE(b);
  EXPECT_EQ(log.frees, 1);
  EXPECT_EQ(pool->Stats().reserved, 512u * 1024);
}

TEST(CachingPoolTest, OutOfMemorySaysWhatWasAskedAndThePoolsState) {
  FakeSystem::Log log;
  auto pool = FakePool(1 << 20, &log);
  Buffer held = pool->Alloc(700'000);
  try {
    pool->Alloc(500'000);
    FAIL() << "no OutOfMemory";
  } catch (const OutOfMemory& e) {
    const std::string message = e.what();
    EXPECT_THAT(message, HasSubstr("device storage on gpu(0)"));
    EXPECT_THAT(message, HasSubstr("asked for 500000 bytes"));
    EXPECT_THAT(message, HasSubstr("allocated 1048576 B"));
    EXPECT_THAT(message, HasSubstr("fake system"));
  }
  EXPECT_EQ(pool->Stats().allocated, 1u << 20) << "the pool is still usable";
  held.Reset();
  EXPECT_TRUE(pool->Alloc(500'000));
}

TEST(CachingPoolTest, ReserveMakesThePoolDropItsCacheFirst) {
  FakeSystem::Log log;
  auto pool = FakePool(4 << 20, &log, /*reserve=*/2 << 20);
  { Buffer a = pool->Alloc(1 << 20); }
  EXPECT_EQ(log.in_use, 1u << 20);
  Buffer b = pool->Alloc(2 << 20);  // 1 + 2 + 2 (reserve) > 4: cache dropped first
  EXPECT_EQ(log.frees, 1);
  EXPECT_EQ(log.in_use, 2u << 20);
}

TEST(StorageOptionsTest, EnvironmentChoosesThePoolAndBadValuesAreNamed) {
  setenv("EMBER_GPU_MEM_POOL_TYPE", "CudaAsync", 1);
  setenv("EMBER_GPU_MEM_POOL_ROUND_CUTOFF", "22", 1);
  setenv("EMBER_UVM_MODE", "mapped", 1);
  StorageOptions options = StorageOptions::FromEnv();
  EXPECT_EQ(options.device_pool, DevicePoolType::kCudaAsync);
  EXPECT_EQ(options.round_cutoff, 22);
  EXPECT_EQ(options.uvm_mode, UvmMode::kMapped);
  setenv("EMBER_GPU_MEM_POOL_TYPE", "Bogus", 1);
  try {
    StorageOptions::FromEnv();
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("EMBER_GPU_MEM_POOL_TYPE='Bogus'"));
    EXPECT_THAT(e.what(), HasSubstr("Round, Naive, CudaAsync"));
  }
  setenv("EMBER_GPU_MEM_POOL_TYPE", "Naive", 1);
  setenv("EMBER_GPU_MEM_POOL_PAGE_SIZE", "1000", 1);
  EXPECT_THROW(StorageOptions::FromEnv(), InvalidArgument);
  for (const char* name : {"EMBER_GPU_MEM_POOL_TYPE", "EMBER_GPU_MEM_POOL_ROUND_CUTOFF",
                           "EMBER_UVM_MODE", "EMBER_GPU_MEM_POOL_PAGE_SIZE"}) {
    unsetenv(name);
  }
}

TEST(StorageFactoryTest, GpuThatDoesNotExistIsUnavailable) {
  try {
    CreateStorageManager(MemoryKind::kDevice, 99, StorageOptions{});
    FAIL() << "no error";
  } catch (const Unavailable& e) {
    EXPECT_THAT(e.what(), HasSubstr("gpu(99)"));
  }
  EXPECT_THROW(CreateStorageManager(MemoryKind::kUvm, 99, StorageOptions{}), Unavailable);
}

TEST(StorageFactoryTest, ProcessWideManagersAreMadeOnce) {
  StorageManager& a = GetStorage(MemoryKind::kCpu);
  StorageManager& b = GetStorage(MemoryKind::kCpu, 3);  // host kinds ignore the device
  EXPECT_EQ(&a, &b);
}

}  // namespace
}  // namespace ember::storage
