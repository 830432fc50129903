// The allocators of ember-bench-storage's columns behind one interface, and
// the CUDA helpers its cases share (storage_cuda.h).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/error.h"
#include "storage/storage.h"
#include "tools/bench/common/spin_kernel.h"
#include "tools/bench/storage/storage_cuda.h"

namespace ember::bench::storage_bench {

void LaunchBusyKernel(cudaStream_t stream, void* data, int us) {
  LaunchSpinIncrement(stream, static_cast<int*>(data), us);
  CheckCuda(cudaGetLastError(), "kernel launch (LaunchSpinIncrement)");
}

bool StreamBusy(cudaStream_t stream) {
  const cudaError_t status = cudaStreamQuery(stream);
  if (status == cudaErrorNotReady) {
    (void)cudaGetLastError();  // "not ready" is an answer, not an error to keep
    return true;
  }
  CheckCuda(status, "cudaStreamQuery");
  return false;
}

namespace {

std::string MiB(double bytes) { return absl::StrFormat("%.0f MiB", bytes / (1 << 20)); }

class EmberAllocator final : public Allocator {
 public:
  EmberAllocator(storage::DevicePoolType pool, int slots)
      : manager_(storage::CreateStorageManager(storage::MemoryKind::kDevice, 0, Options(pool))),
        buffers_(slots) {}

  void Alloc(int slot, std::size_t bytes, cudaStream_t stream) override {
    buffers_[slot] = manager_->Alloc(bytes, stream);
  }
  void Free(int slot, cudaStream_t stream) override {
    storage::Buffer& buffer = buffers_[slot];
    buffer.RecordUse(stream);
    buffer.Reset();
  }
  [[nodiscard]] void* data(int slot) const override { return buffers_[slot].data(); }
  [[nodiscard]] std::string Describe() const override {
    const storage::MemoryStats stats = manager_->Stats();
    return absl::StrFormat("%d buffers from %d system allocations, %s reserved at peak",
                           stats.allocations, stats.system_allocations,
                           MiB(static_cast<double>(stats.peak_reserved)));
  }

 private:
  static storage::StorageOptions Options(storage::DevicePoolType pool) {
    storage::StorageOptions options;
    options.device_pool = pool;
    return options;
  }

  std::unique_ptr<storage::StorageManager> manager_;  // outlives buffers_
  std::vector<storage::Buffer> buffers_;
};

// Frees on the destructor are for a run cut short by an exception; their
// errors are not checked there.
class MallocAsyncAllocator final : public Allocator {
 public:
  explicit MallocAsyncAllocator(int slots) : ptrs_(slots, nullptr) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    CheckCuda(cudaMemPoolCreate(&pool_, &props), "cudaMemPoolCreate");
    uint64_t threshold = UINT64_MAX;  // keep everything: cudaMallocAsync's best case
    CheckCuda(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &threshold),
              "cudaMemPoolSetAttribute (cudaMemPoolAttrReleaseThreshold)");
  }
  ~MallocAsyncAllocator() override {
    for (void* ptr : ptrs_) {
      if (ptr != nullptr) (void)cudaFree(ptr);
    }
    (void)cudaDeviceSynchronize();
    (void)cudaMemPoolDestroy(pool_);
  }

  void Alloc(int slot, std::size_t bytes, cudaStream_t stream) override {
    CheckCuda(cudaMallocFromPoolAsync(&ptrs_[slot], bytes, pool_, stream),
              "cudaMallocFromPoolAsync");
  }
  void Free(int slot, cudaStream_t stream) override {
    CheckCuda(cudaFreeAsync(ptrs_[slot], stream), "cudaFreeAsync");
    ptrs_[slot] = nullptr;
  }
  [[nodiscard]] void* data(int slot) const override { return ptrs_[slot]; }
  [[nodiscard]] std::string Describe() const override {
    uint64_t high = 0;
    CheckCuda(cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReservedMemHigh, &high),
              "cudaMemPoolGetAttribute (cudaMemPoolAttrReservedMemHigh)");
    return absl::StrCat(MiB(static_cast<double>(high)), " reserved at peak");
  }

 private:
  cudaMemPool_t pool_ = nullptr;
  std::vector<void*> ptrs_;
};

class MallocAllocator final : public Allocator {
 public:
  explicit MallocAllocator(int slots) : ptrs_(slots, nullptr) {}
  ~MallocAllocator() override {
    for (void* ptr : ptrs_) {
      if (ptr != nullptr) (void)cudaFree(ptr);
    }
  }

  void Alloc(int slot, std::size_t bytes, cudaStream_t /*stream*/) override {
    CheckCuda(cudaMalloc(&ptrs_[slot], bytes), "cudaMalloc");
  }
  void Free(int slot, cudaStream_t /*stream*/) override {
    CheckCuda(cudaFree(ptrs_[slot]), "cudaFree");
    ptrs_[slot] = nullptr;
  }
  [[nodiscard]] void* data(int slot) const override { return ptrs_[slot]; }
  [[nodiscard]] std::string Describe() const override { return ""; }

 private:
  std::vector<void*> ptrs_;
};

}  // namespace

std::unique_ptr<Allocator> MakeAllocator(const std::string& column, int slots) {
  if (column == kRound) {
    return std::make_unique<EmberAllocator>(storage::DevicePoolType::kRound, slots);
  }
  if (column == kAsync) {
    return std::make_unique<EmberAllocator>(storage::DevicePoolType::kCudaAsync, slots);
  }
  if (column == kMallocAsync) return std::make_unique<MallocAsyncAllocator>(slots);
  if (column == kMalloc) return std::make_unique<MallocAllocator>(slots);
  throw InvalidArgument(
      absl::StrCat("[ember-bench-storage] no allocator for column '", column, "'"));
}

Streams::Streams(int count) {
  for (int i = 0; i < count; ++i) {
    cudaStream_t stream = nullptr;
    CheckCuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
              "cudaStreamCreateWithFlags");
    streams_.push_back(stream);
  }
}

Streams::~Streams() {
  for (cudaStream_t stream : streams_) (void)cudaStreamDestroy(stream);
}

}  // namespace ember::bench::storage_bench
