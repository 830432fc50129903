#pragma once

// BlockPool: recycled memory for OprBlocks.
//
// Why: a block is allocated by the pushing thread and freed by a worker.
// With glibc malloc every such cross-thread free takes the pusher's arena
// lock, which the pusher holds while allocating the next block: measured at
// over a third of the engine's time on the random DAG, mostly futex waits.
// A lock-free free list (moodycamel's queue) hands the memory back instead.
// It keeps at most kMaxPooled blocks; beyond that frees go to the heap, so
// resident memory stays bounded by the in-flight bound.
//
// Thread safety: thread-safe.

#include <cstddef>

namespace ember::engine::internal {

class BlockPool {
 public:
  // Memory for one block of `size` bytes (always the same size).
  static void* Allocate(std::size_t size);
  static void Free(void* memory, std::size_t size);
};

}  // namespace ember::engine::internal
