// The CUDA system allocators behind the caching pools (see gpu_storage.h):
// cudaMalloc for device memory, cudaHostAlloc for pinned memory,
// cudaMallocManaged (or host-mapped memory) for UVM.

#include <cstdint>
#include <memory>
#include <string>

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "engine/cuda/check.h"
#include "engine/error.h"
#include "storage/internal/caching_pool.h"
#include "storage/internal/gpu_storage.h"
#include "storage/internal/system_memory.h"

namespace ember::storage::internal {
namespace {

// Makes `device` current for the scope: allocations go to the current device.
class ScopedDevice {
 public:
  explicit ScopedDevice(int device) {
    CudaCheck(cudaGetDevice(&previous_), "cudaGetDevice");
    if (previous_ != device) CudaCheck(cudaSetDevice(device), "cudaSetDevice");
  }
  ~ScopedDevice() { CudaLogIfError(cudaSetDevice(previous_), "cudaSetDevice (restore)"); }
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

 private:
  int previous_ = 0;
};

// False for out of memory (the sticky error cleared), throws for the rest.
bool Allocated(cudaError_t status, const char* what) {
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    return false;
  }
  CudaCheck(status, what);
  return true;
}

std::string DeviceMemory(int device) {
  std::size_t free = 0;
  std::size_t total = 0;
  ScopedDevice scope(device);
  if (!CudaLogIfError(cudaMemGetInfo(&free, &total), "cudaMemGetInfo")) return "gpu state unknown";
  return fmt::format("gpu({}): {} B free of {} B", device, free, total);
}

class DeviceMemorySystem final : public SystemMemory {
 public:
  DeviceMemorySystem(int device, int reserve_percent)
      : device_(device), reserve_percent_(reserve_percent) {}
  void* Allocate(std::size_t bytes) override {
    ScopedDevice scope(device_);
    void* data = nullptr;
    return Allocated(cudaMalloc(&data, bytes), "cudaMalloc") ? data : nullptr;
  }
  void Free(void* data) override {
    ScopedDevice scope(device_);
    CudaLogIfError(cudaFree(data), "cudaFree");
  }
  std::string Describe() const override { return DeviceMemory(device_); }
  bool WouldCrossReserve(std::size_t bytes) const override {
    std::size_t free = 0;
    std::size_t total = 0;
    ScopedDevice scope(device_);
    CudaCheck(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
    return free < bytes + total / 100 * reserve_percent_;
  }

 private:
  const int device_;
  const int reserve_percent_;
};

class PinnedMemorySystem final : public SystemMemory {
 public:
  void* Allocate(std::size_t bytes) override {
    void* data = nullptr;
    return Allocated(cudaHostAlloc(&data, bytes, cudaHostAllocPortable), "cudaHostAlloc") ? data
                                                                                          : nullptr;
  }
  void Free(void* data) override { CudaLogIfError(cudaFreeHost(data), "cudaFreeHost"); }
  std::string Describe() const override { return "pinned host memory (cudaHostAlloc)"; }
};

// Managed memory that lives on the host and that `device` reads in place
// (no migration on first touch), which is what embedding tables larger than
// the GPU want.
//
// Never more than the GPU has free: on a shared machine a managed request
// beyond it can hang the GPU for every user, so it is refused up front,
// naming the way out (host-mapped memory).
class ManagedMemorySystem final : public SystemMemory {
 public:
  explicit ManagedMemorySystem(int device) : device_(device) {}
  void* Allocate(std::size_t bytes) override {
    ScopedDevice scope(device_);
    const std::size_t free = FreeBytes(device_);
    if (bytes > free) {
      throw OutOfMemory(fmt::format(
          "[UVM (managed)] refusing cudaMallocManaged of {} bytes: gpu({}) has {} bytes free, and "
          "managed memory beyond the GPU's free memory can hang the GPU; use host-mapped pinned "
          "memory instead (EMBER_UVM_MODE=mapped, or cache::HomeMemory::kMapped)",
          bytes, device_, free));
    }
    void* data = nullptr;
    if (!Allocated(cudaMallocManaged(&data, bytes, cudaMemAttachGlobal), "cudaMallocManaged")) {
      return nullptr;
    }
    const cudaMemLocation host{cudaMemLocationTypeHost, 0};
    const cudaMemLocation gpu{cudaMemLocationTypeDevice, device_};
    CudaCheck(cudaMemAdvise(data, bytes, cudaMemAdviseSetPreferredLocation, host),
              "cudaMemAdvise (prefer the CPU)");
    CudaCheck(cudaMemAdvise(data, bytes, cudaMemAdviseSetAccessedBy, gpu),
              "cudaMemAdvise (accessed by the GPU)");
    return data;
  }
  void Free(void* data) override { CudaLogIfError(cudaFree(data), "cudaFree (managed)"); }
  std::string Describe() const override {
    return "managed memory preferring the CPU; " + DeviceMemory(device_);
  }

 private:
  const int device_;
};

// Pinned host memory mapped into the GPU's address space (UVA: the same
// pointer on both sides).
class MappedMemorySystem final : public SystemMemory {
 public:
  void* Allocate(std::size_t bytes) override {
    void* data = nullptr;
    const unsigned flags = cudaHostAllocMapped | cudaHostAllocPortable;
    return Allocated(cudaHostAlloc(&data, bytes, flags), "cudaHostAlloc (mapped)") ? data : nullptr;
  }
  void Free(void* data) override { CudaLogIfError(cudaFreeHost(data), "cudaFreeHost (mapped)"); }
  std::string Describe() const override { return "host-mapped pinned memory (cudaHostAlloc)"; }
};

}  // namespace

std::size_t FreeBytes(int device) {
  ScopedDevice scope(device);
  std::size_t free = 0;
  std::size_t total = 0;
  CudaCheck(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  return free;
}

namespace {

bool SupportsManaged(int device) {
  int managed = 0;
  CudaCheck(cudaDeviceGetAttribute(&managed, cudaDevAttrManagedMemory, device),
            "cudaDeviceGetAttribute (managed memory)");
  return managed != 0;
}

SizeClasses ClassesFor(const StorageOptions& options) {
  return options.device_pool == DevicePoolType::kNaive
             ? SizeClasses::Exact(options.page_size)
             : SizeClasses::Round(options.page_size, options.round_cutoff);
}

}  // namespace

std::unique_ptr<StorageManager> MakePinnedPool(const StorageOptions& options) {
  return std::make_unique<CachingPool>(MemoryKind::kPinned, -1,
                                       SizeClasses::Round(options.page_size, options.round_cutoff),
                                       std::make_unique<PinnedMemorySystem>());
}

std::unique_ptr<StorageManager> MakeDevicePool(int device, const StorageOptions& options) {
  return std::make_unique<CachingPool>(
      MemoryKind::kDevice, device, ClassesFor(options),
      std::make_unique<DeviceMemorySystem>(device, options.reserve_percent));
}

// UVM tables are large and long-lived: exact (page) sizes, no rounding waste.
std::unique_ptr<StorageManager> MakeUvmPool(int device, const StorageOptions& options) {
  const bool managed = options.uvm_mode == UvmMode::kManaged ||
                       (options.uvm_mode == UvmMode::kAuto && SupportsManaged(device));
  if (options.uvm_mode == UvmMode::kManaged && !SupportsManaged(device)) {
    throw Unavailable(fmt::format(
        "[CreateStorageManager] gpu({}) does not support managed memory (EMBER_UVM_MODE=managed)",
        device));
  }
  std::unique_ptr<SystemMemory> system;
  if (managed) {
    system = std::make_unique<ManagedMemorySystem>(device);
  } else {
    system = std::make_unique<MappedMemorySystem>();
  }
  return std::make_unique<CachingPool>(MemoryKind::kUvm, device,
                                       SizeClasses::Exact(options.page_size), std::move(system));
}

}  // namespace ember::storage::internal
