// The caching pool over a fake system allocator, so that reuse, statistics,
// the reserve and out-of-memory handling are checked without a GPU.

#include "storage/internal/caching_pool.h"

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

}  // namespace
}  // namespace ember::storage
