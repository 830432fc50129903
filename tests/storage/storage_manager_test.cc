// Storage managers on the CPU: the aligned CPU manager, options and errors.
// (The caching pool's own tests sit beside it: storage/internal/.)

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
