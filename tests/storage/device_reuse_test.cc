// Event-ordered reuse on a real GPU, for every GPU-visible kind and device
// pool: random workloads that allocate, use and release buffers across
// streams never see another owner's data; statistics, out-of-memory errors,
// and frees that do not block the host. Skipped without a CUDA device.

#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/cuda/check.h"
#include "storage/storage.h"
#include "tests/storage/pattern_kernels.h"

namespace ember::storage {
namespace {

using ::testing::HasSubstr;
using testing::LaunchCountMismatches;
using testing::LaunchFill;

struct ReuseCase {
  MemoryKind kind;
  DevicePoolType pool;
  UvmMode uvm = UvmMode::kAuto;
};

std::string CaseName(const ::testing::TestParamInfo<ReuseCase>& info) {
  std::string name(ToString(info.param.kind));
  if (info.param.kind == MemoryKind::kDevice) {
    name += info.param.pool == DevicePoolType::kRound   ? "_Round"
            : info.param.pool == DevicePoolType::kNaive ? "_Naive"
                                                        : "_CudaAsync";
  }
  if (info.param.kind == MemoryKind::kUvm) {
    name += info.param.uvm == UvmMode::kMapped ? "_Mapped" : "_Auto";
  }
  return name;
}

class DeviceReuseTest : public ::testing::TestWithParam<ReuseCase> {
 protected:
  void SetUp() override {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      (void)cudaGetLastError();
      GTEST_SKIP() << "no CUDA device (or driver) on this machine";
    }
    CudaCheck(cudaSetDevice(0), "cudaSetDevice");
    StorageOptions options;
    options.device_pool = GetParam().pool;
    options.uvm_mode = GetParam().uvm;
    manager_ = CreateStorageManager(GetParam().kind, 0, options);
    for (cudaStream_t& stream : streams_) {
      CudaCheck(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    }
    CudaCheck(cudaMalloc(reinterpret_cast<void**>(&errors_), sizeof(int)), "cudaMalloc");
    CudaCheck(cudaMemset(errors_, 0, sizeof(int)), "cudaMemset");
    CudaCheck(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  void TearDown() override {
    if (manager_ == nullptr) return;
    CudaCheck(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    for (cudaStream_t stream : streams_) CudaCheck(cudaStreamDestroy(stream), "cudaStreamDestroy");
    CudaCheck(cudaFree(errors_), "cudaFree");
    manager_.reset();
  }
  int Errors() {
    int errors = 0;
    CudaCheck(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    CudaCheck(cudaMemcpy(&errors, errors_, sizeof(int), cudaMemcpyDeviceToHost), "cudaMemcpy");
    return errors;
  }
  // A new owner's use of `buffer` on `stream`: poison at once (what a
  // missing wait would let overwrite the previous owner's data), then its
  // own value after a delay, checked after another.
  void Use(Buffer& buffer, cudaStream_t stream, int value, int delay_us) {
    int* data = static_cast<int*>(buffer.data());
    const int n = static_cast<int>(buffer.size() / sizeof(int));
    LaunchFill(stream, data, n, -value, 0);
    LaunchFill(stream, data, n, value, delay_us);
    LaunchCountMismatches(stream, data, n, value, errors_, delay_us);
    CudaCheck(cudaGetLastError(), "kernel launch");
  }

  std::unique_ptr<StorageManager> manager_;
  cudaStream_t streams_[3] = {};
  int* errors_ = nullptr;
};

// Buffers hop between three streams and are released while their kernels
// still run; every reuse must wait for them.
TEST_P(DeviceReuseTest, RandomWorkloadAcrossStreamsNeverSeesStaleData) {
  std::mt19937 rng(7);
  const std::size_t sizes[] = {4096, 20000, 65536, 1 << 20};
  std::vector<Buffer> live;
  for (int step = 1; step <= 400; ++step) {
    cudaStream_t stream = streams_[rng() % 3];
    Buffer buffer = manager_->Alloc(sizes[rng() % 4], stream);
    Use(buffer, stream, step, static_cast<int>(rng() % 150));
    if (rng() % 4 == 0) {  // a reader on another stream too
      cudaStream_t other = streams_[rng() % 3];
      cudaEvent_t written = nullptr;
      CudaCheck(cudaEventCreateWithFlags(&written, cudaEventDisableTiming), "cudaEventCreate");
      CudaCheck(cudaEventRecord(written, stream), "cudaEventRecord");
      CudaCheck(cudaStreamWaitEvent(other, written, 0), "cudaStreamWaitEvent");
      CudaCheck(cudaEventDestroy(written), "cudaEventDestroy");
      LaunchCountMismatches(other, static_cast<int*>(buffer.data()),
                            static_cast<int>(buffer.size() / sizeof(int)), step, errors_, 100);
      buffer.RecordUse(other);
    }
    live.push_back(std::move(buffer));
    while (live.size() > 3 || (!live.empty() && rng() % 2 == 0)) {
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(rng() % live.size()));
    }
  }
  live.clear();
  EXPECT_EQ(Errors(), 0) << "a buffer was reused before its last users finished";
  EXPECT_LT(manager_->Stats().system_allocations, 100u) << "buffers were not reused";
}

// The control: without ordering the first use, the same workload does see
// stale data, so the test above can fail.
TEST_P(DeviceReuseTest, WithoutOrderingTheFirstUseReuseIsStale) {
  if (GetParam().pool == DevicePoolType::kCudaAsync && GetParam().kind == MemoryKind::kDevice) {
    GTEST_SKIP() << "the stream-ordered allocator orders reuse itself";
  }
  // The overwrite follows the first owner's fill by an event and so lands
  // inside its check's 2 ms delay, whenever each stream's kernels start:
  // timed by delays alone, a late start of either stream hid it (once, on
  // an H100 with managed memory).
  Buffer first = manager_->Alloc(1 << 20, streams_[0]);
  int* data = static_cast<int*>(first.data());
  const int n = (1 << 20) / 4;
  LaunchFill(streams_[0], data, n, 1, 0);
  cudaEvent_t filled = nullptr;
  CudaCheck(cudaEventCreateWithFlags(&filled, cudaEventDisableTiming), "cudaEventCreate");
  CudaCheck(cudaEventRecord(filled, streams_[0]), "cudaEventRecord");
  LaunchCountMismatches(streams_[0], data, n, 1, errors_, 2000);
  first.Reset();
  Buffer second = manager_->Alloc(1 << 20);  // no OrderFirstUse yet
  ASSERT_TRUE(second.has_pending());
  ASSERT_EQ(second.data(), data);
  CudaCheck(cudaStreamWaitEvent(streams_[1], filled, 0), "cudaStreamWaitEvent");
  CudaCheck(cudaEventDestroy(filled), "cudaEventDestroy");
  LaunchFill(streams_[1], static_cast<int*>(second.data()), n, -2, 0);
  second.OrderFirstUse(streams_[1]);  // gives the fences back
  EXPECT_GT(Errors(), 0) << "the unordered overwrite went unnoticed";
}

TEST_P(DeviceReuseTest, HostFirstUseWaitsForTheGpu) {
  if (GetParam().kind == MemoryKind::kDevice) GTEST_SKIP() << "the host cannot touch device memory";
  Buffer first = manager_->Alloc(1 << 16, streams_[0]);
  const void* reused = first.data();
  LaunchFill(streams_[0], static_cast<int*>(first.data()), (1 << 16) / 4, 5, 3000);
  first.Reset();
  Buffer second = manager_->Alloc(1 << 16, nullptr);  // the host waits here
  ASSERT_EQ(second.data(), reused) << "the one cached block of the class was not reused";
  EXPECT_EQ(static_cast<const int*>(second.data())[(1 << 16) / 4 - 1], 5)
      << "the host got the block before the GPU's last write";
}

TEST_P(DeviceReuseTest, StatisticsFollowAllocationsAndRelease) {
  manager_->ReleaseCached();
  manager_->ResetPeaks();
  const MemoryStats start = manager_->Stats();
  std::vector<Buffer> buffers;
  std::size_t held = 0;
  for (std::size_t bytes : {4096u, 5000u, 1u << 20, 3u << 20}) {
    buffers.push_back(manager_->Alloc(bytes, streams_[0]));
    held += buffers.back().capacity();
  }
  MemoryStats stats = manager_->Stats();
  EXPECT_EQ(stats.allocated - start.allocated, held);
  EXPECT_GE(stats.reserved, stats.allocated);
  EXPECT_EQ(stats.peak_allocated, stats.allocated);
  buffers.clear();
  stats = manager_->Stats();
  EXPECT_EQ(stats.allocated, start.allocated);
  EXPECT_EQ(stats.peak_allocated - start.allocated, held);
  manager_->ReleaseCached();
  EXPECT_EQ(manager_->Stats().reserved, 0u);
  manager_->ResetPeaks();
  EXPECT_EQ(manager_->Stats().peak_allocated, 0u);
}

TEST_P(DeviceReuseTest, ReleasingWhileTheGpuIsBusyDoesNotBlockTheHost) {
  Buffer buffer = manager_->Alloc(1 << 20, streams_[0]);
  Use(buffer, streams_[0], 9, 50'000);  // 50 ms of GPU work on it
  const auto start = std::chrono::steady_clock::now();
  buffer.Reset();
  Buffer next = manager_->Alloc(1 << 20, streams_[1]);  // ordered by a stream wait
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(ms, 25.0) << "release or reuse waited for the GPU on the host";
  Use(next, streams_[1], 10, 0);
  EXPECT_EQ(Errors(), 0);
}

TEST_P(DeviceReuseTest, OutOfMemoryNamesTheSizeAndLeavesTheManagerUsable) {
  if (GetParam().kind != MemoryKind::kDevice) GTEST_SKIP() << "host memory: no GPU limit to hit";
  std::size_t free = 0;
  std::size_t total = 0;
  CudaCheck(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  const std::size_t too_much = total * 2;
  try {
    manager_->Alloc(too_much, streams_[0]);
    FAIL() << "no OutOfMemory";
  } catch (const OutOfMemory& e) {
    EXPECT_THAT(e.what(), HasSubstr("asked for " + std::to_string(too_much) + " bytes"));
    EXPECT_THAT(e.what(), HasSubstr("gpu(0)"));
  }
  Buffer fine = manager_->Alloc(4096, streams_[0]);
  EXPECT_TRUE(fine);
}

// The rule for tables larger than the GPU: managed memory beyond what the
// GPU has free is refused before any cudaMallocManaged (such a request can
// hang the GPU for every user), naming the size, the free memory and the
// way out (host-mapped memory); the manager stays usable.
TEST(ManagedMemoryTest, ARequestBeyondTheGpusFreeMemoryIsRefusedNamingTheMappedMode) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    (void)cudaGetLastError();
    GTEST_SKIP() << "no CUDA device (or driver) on this machine";
  }
  StorageOptions options;
  options.uvm_mode = UvmMode::kManaged;
  std::unique_ptr<StorageManager> manager = CreateStorageManager(MemoryKind::kUvm, 0, options);
  std::size_t free = 0;
  std::size_t total = 0;
  CudaCheck(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  const std::size_t too_much = free + (std::size_t{1} << 30);
  EXPECT_THAT([&] { (void)manager->Alloc(too_much); },
              ::testing::ThrowsMessage<OutOfMemory>(::testing::AllOf(
                  HasSubstr("refusing cudaMallocManaged of "), HasSubstr("bytes free"),
                  HasSubstr("gpu(0)"), HasSubstr("EMBER_UVM_MODE=mapped"))));
  Buffer fine = manager->Alloc(std::size_t{1} << 20);
  EXPECT_TRUE(fine);
}

INSTANTIATE_TEST_SUITE_P(
    AllKinds, DeviceReuseTest,
    ::testing::Values(ReuseCase{MemoryKind::kDevice, DevicePoolType::kRound},
                      ReuseCase{MemoryKind::kDevice, DevicePoolType::kNaive},
                      ReuseCase{MemoryKind::kDevice, DevicePoolType::kCudaAsync},
                      ReuseCase{MemoryKind::kPinned, DevicePoolType::kRound},
                      ReuseCase{MemoryKind::kUvm, DevicePoolType::kRound, UvmMode::kAuto},
                      ReuseCase{MemoryKind::kUvm, DevicePoolType::kRound, UvmMode::kMapped}),
    CaseName);

}  // namespace
}  // namespace ember::storage
