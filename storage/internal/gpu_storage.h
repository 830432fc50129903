#pragma once

// The managers that need CUDA. A build with CUDA links cuda_system.cc and
// cuda_async_pool.cc; one without links no_cuda.cc, whose functions throw
// Unavailable.
//
// Thread safety: thread-safe.

#include <cstddef>
#include <memory>

#include "storage/storage.h"

namespace ember::storage::internal {

// Bytes free on `device` now (cudaMemGetInfo).
std::size_t FreeBytes(int device);

std::unique_ptr<StorageManager> MakePinnedPool(const StorageOptions& options);
std::unique_ptr<StorageManager> MakeDevicePool(int device, const StorageOptions& options);
std::unique_ptr<StorageManager> MakeCudaAsyncPool(int device);
std::unique_ptr<StorageManager> MakeUvmPool(int device, const StorageOptions& options);

}  // namespace ember::storage::internal
