#pragma once

// AccessQueue: a var's FIFO of the ops waiting for it, as arrays of op
// pointers in 64-byte chunks rather than a list linked through the ops.
//
// Why: the worker that releases a var grants the accesses at the head of its
// queue, often a run of reads. Linked through the waiting ops' own VarLinks,
// each step of that run read a link the pushing thread had just written
// (a cache line on the other core) before it could read the next one: two
// dependent misses per grant, one after the other. Here the next accesses
// sit side by side in one line, so the worker fetches that line once and
// the ops' headers all at the same time (PrefetchFront).
//
// An entry is the op's block and whether it writes. Chunks come from the
// BlockPool; Push never
// allocates: each pushing thread sets chunks aside first (Reserve), before
// it takes any var's lock, so a push never fails half-queued.
//
// Thread safety: guarded by the owning var's lock, except Reserve (per
// thread).

#include <cstddef>
#include <cstdint>

#include "engine/internal/access.h"

namespace ember::engine::internal {

struct OprBlock;

class AccessQueue {
 public:
  struct Entry {
    OprBlock* block;
    bool writes;
  };

  AccessQueue() = default;
  AccessQueue(const AccessQueue&) = delete;
  AccessQueue& operator=(const AccessQueue&) = delete;

  // Sets aside enough chunks for `pushes` calls of Push on this thread.
  // May throw std::bad_alloc; Push then cannot.
  static void Reserve(std::size_t pushes);

  [[nodiscard]] bool empty() const { return head_ == nullptr; }
  // REQUIRES: !empty().
  [[nodiscard]] Entry front() const;
  void pop_front();
  // REQUIRES: Reserve has set a chunk aside for it.
  void Push(OprBlock* block, Access mode);

  // Starts fetching the ops that the head's grant may reach: the entries
  // up to the first write, and the chunk after the head's.
  void PrefetchFront() const;

  // Frees the chunks of a queue left non-empty (a var reset for reuse).
  void Clear();

 private:
  struct Chunk;

  Chunk* head_ = nullptr;
  Chunk* tail_ = nullptr;
};

}  // namespace ember::engine::internal
