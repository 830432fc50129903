#pragma once

// BlockPool: recycled memory for OprBlocks and var queue chunks, by size
// class.
//
// Why: a block is allocated by the pushing thread and freed by a worker.
// With glibc malloc every such cross-thread free takes the pusher's arena
// lock, which the pusher holds while allocating the next block: over a third
// of the engine's time on the random DAG went to futex waits there, and
// every futex wait is a context switch.
//
// Shape: a block's size (an op header and its var links, or a var's queue
// chunk, access_queue.h) picks one of a few size classes; blocks larger
// than the largest class (ops naming over ~100 vars) come from the heap.
// Per class, each thread keeps a small LIFO cache of free blocks (the most recently freed one is
// still in cache), and threads exchange batches through a lock-free shared queue (moodycamel's): a
// worker's frees flow in batches to the pusher's allocations. A class's shared queue holds at most
// 64 MiB of blocks (enough for the default in-flight bound); beyond that frees go back to the heap.
//
// Thread safety: thread-safe.

#include <cstddef>

namespace ember::engine::internal {

class BlockPool {
 public:
  // Memory for a block of `size` bytes (64-byte aligned).
  static void* Allocate(std::size_t size);
  // REQUIRES: `memory` came from Allocate(size) with the same size.
  static void Free(void* memory, std::size_t size);

  // Sets aside `count` blocks of `size` for this thread, allocating what is
  // missing now (so this may throw); TakeReserved then hands them out
  // without allocating, for callers that must not fail midway.
  // REQUIRES: `size` is a small block's (at most 4 KiB).
  static void Reserve(std::size_t size, std::size_t count);
  // REQUIRES: a block of `size` set aside on this thread and not yet taken.
  static void* TakeReserved(std::size_t size);
  // Gives back what this thread has set aside beyond `keep` blocks.
  static void TrimReserve(std::size_t size, std::size_t keep);
};

}  // namespace ember::engine::internal
