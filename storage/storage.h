#pragma once

// The storage layer's entry points: options, and the managers by kind.
//
//   auto& device = ember::storage::GetStorage(MemoryKind::kDevice, 0);
//   Buffer b = device.Alloc(bytes, stream);  // first use on `stream`
//   ...                                      // launch work on stream
//   b.Reset();                               // reused after that work
//
// Kinds and their managers (docs/storage.md):
//   kCpu     aligned host memory, straight from the system
//   kPinned  page-locked host memory, cached by size class
//   kDevice  a caching pool of cudaMalloc blocks (size classes "round" or
//            "naive", MXNet's two), or CUDA's stream-ordered allocator
//            (a cudaMemPool_t, cudaMallocAsync/cudaFreeAsync)
//   kUvm     managed memory preferring the CPU and accessed by the GPU, or
//            host-mapped pinned memory where managed memory is unsupported
//            or EMBER_UVM_MODE=mapped; cached by exact (page) size
//
// Thread safety: thread-safe.

#include <cstddef>
#include <memory>

#include "storage/buffer.h"
#include "storage/memory.h"
#include "storage/storage_manager.h"

namespace ember::storage {

enum class DevicePoolType {
  kRound,      // powers of two up to 2^round_cutoff bytes, then multiples of it
  kNaive,      // exact sizes, rounded up to the page size
  kCudaAsync,  // CUDA's stream-ordered allocator
};

enum class UvmMode {
  kAuto,     // managed memory where the device supports it, else mapped
  kManaged,  // cudaMallocManaged (an error where unsupported)
  kMapped,   // cudaHostAlloc(cudaHostAllocMapped)
};

struct StorageOptions {
  DevicePoolType device_pool = DevicePoolType::kRound;
  int round_cutoff = 24;         // log2 bytes: 16 MiB
  std::size_t page_size = 4096;  // smallest size class, and the rounding of kNaive
  // Percent of device memory the device pool leaves free: it drops its cache
  // before a new cudaMalloc would cross it.
  int reserve_percent = 5;
  UvmMode uvm_mode = UvmMode::kAuto;

  // Options from the environment (EMBER_GPU_MEM_POOL_TYPE,
  // EMBER_GPU_MEM_POOL_ROUND_CUTOFF, EMBER_GPU_MEM_POOL_PAGE_SIZE,
  // EMBER_GPU_MEM_POOL_RESERVE, EMBER_UVM_MODE), defaults elsewhere. Throws
  // InvalidArgument naming the variable for a bad value.
  static StorageOptions FromEnv();
};

// A new manager of `kind` on `device` (ignored for kCpu and kPinned).
// Throws Unavailable without CUDA or for a GPU that does not exist,
// InvalidArgument for bad options.
std::unique_ptr<StorageManager> CreateStorageManager(MemoryKind kind, int device,
                                                     const StorageOptions& options);

// Bytes free on GPU `device` now (cudaMemGetInfo). Throws Unavailable
// without CUDA or for a GPU that does not exist.
std::size_t DeviceFreeBytes(int device);

// The process-wide manager of `kind` on `device`, made on first use with
// StorageOptions::FromEnv(); it lives until exit. kCpu has one manager;
// kPinned one per GPU, so that engines that each drive their own GPU
// (EngineOptions::host_memory_gpu) never share pinned blocks, whose reuse
// would wait for another engine's streams.
StorageManager& GetStorage(MemoryKind kind, int device = 0);

}  // namespace ember::storage
