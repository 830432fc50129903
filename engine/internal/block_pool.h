#pragma once

// BlockPool: recycled memory for OprBlocks.
//
// Why: a block is allocated by the pushing thread and freed by a worker.
// With glibc malloc every such cross-thread free takes the pusher's arena
// lock, which the pusher holds while allocating the next block: measured at
// over a third of the engine's time on the random DAG, mostly futex waits.
//
// Shape: each thread keeps a small LIFO cache of free blocks (the most
// recently freed block is the one still in cache), and threads exchange
// batches through a lock-free shared queue (moodycamel's). A worker's frees
// flow in batches to the pusher's allocations. The shared queue holds at most
// kMaxShared blocks; beyond that frees go back to the heap, so memory stays
// bounded by the in-flight bound.
//
// Thread safety: thread-safe.

#include <cstddef>

namespace ember::engine::internal {

class BlockPool {
 public:
  // Memory for one block of `size` bytes (always the same size).
  static void* Allocate(std::size_t size);
  static void Free(void* memory);
};

}  // namespace ember::engine::internal
