#pragma once

// CPU storage: pageable host memory straight from the system, 64-byte
// aligned (a cache line, and enough for any vector load). Not cached: malloc
// already reuses memory well, and pageable memory is not used by the GPU
// asynchronously (copies from it are staged before they return).
//
// Thread safety: thread-safe.

#include <memory>

#include "storage/storage_manager.h"

namespace ember::storage::internal {

std::unique_ptr<StorageManager> MakeCpuStorage();

}  // namespace ember::storage::internal
