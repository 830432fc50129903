#pragma once

// HomeMemoryFor: the memory manager of a cache's home rows. On the CPU,
// host memory. On a GPU, kUvm memory in the mode CacheOptions::home asks
// for; kAuto takes managed memory only when the rows fit in half the GPU's
// free memory (the other half is for the cache's slots and the model, and
// managed memory beyond the free memory can hang the GPU), host-mapped
// pinned memory otherwise. Managers are made once per (device, mode) and
// live for the process, as GetStorage's do, so that tensors made from them
// may be deleted through the engine after their cache is gone.
//
// Thread safety: thread-safe.

#include <cstddef>

#include "cache/cache_options.h"
#include "engine/context.h"
#include "storage/storage_manager.h"

namespace ember::cache::internal {

storage::StorageManager& HomeMemoryFor(engine::Context ctx, HomeMemory home, std::size_t bytes);

}  // namespace ember::cache::internal
