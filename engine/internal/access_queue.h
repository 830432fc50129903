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
// Memory: an entry is the op's block and whether it writes. Chunks come
// from the BlockPool, and no pool call is made under the var's lock: a
// pushing thread sets chunks aside before it takes any lock (Reserve), so
// Push never allocates and a push never fails half-queued; chunks used up
// by PopFront go to a Spent list, freed once the lock is released.
//
// Thread safety: guarded by the owning var's lock, except the static
// functions (each about the calling thread) and Spent (the caller's own).

#include <cstddef>

#include "engine/internal/access.h"

namespace ember::engine::internal {

struct OprBlock;

class AccessQueue {
  struct Chunk;

 public:
  struct Entry {
    OprBlock* block;
    bool writes;
  };

  // Used-up chunks, freed when it goes out of scope. Declare it before the
  // var's lock holder, so that it outlives the lock.
  class Spent {
   public:
    Spent() = default;
    Spent(const Spent&) = delete;
    Spent& operator=(const Spent&) = delete;
    ~Spent();

   private:
    friend class AccessQueue;
    Chunk* head_ = nullptr;
  };

  // Sets aside enough chunks for `pushes` calls of Push on this thread.
  // May throw std::bad_alloc; Push then cannot.
  static void Reserve(std::size_t pushes);
  // After a push of `pushes` vars: one of many vars gives back what this
  // thread set aside beyond kKeptReserve chunks (most pushes set aside a
  // few, and pay only this comparison).
  static void TrimReserve(std::size_t pushes) {
    if (pushes > kKeptReserve) GiveBackReserve();
  }

  AccessQueue() = default;
  AccessQueue(const AccessQueue&) = delete;
  AccessQueue& operator=(const AccessQueue&) = delete;
  ~AccessQueue();  // frees what a var dropped with accesses left would keep

  [[nodiscard]] bool empty() const { return head_ == nullptr; }
  // REQUIRES: !empty().
  [[nodiscard]] Entry front() const;
  // Removes the front; a chunk it used up goes to `spent`. REQUIRES: !empty().
  void PopFront(Spent* spent);
  // REQUIRES: Reserve has set a chunk aside for it.
  void Push(OprBlock* block, Access mode);

  // Starts fetching the ops that the head's grant may reach: the entries
  // up to the first write, and the chunk after the head's.
  void PrefetchFront() const;

  // Empties the queue (a var reset for reuse), its chunks going to `spent`.
  void Clear(Spent* spent);

 private:
  static constexpr std::size_t kKeptReserve = 64;
  static void GiveBackReserve();

  Chunk* head_ = nullptr;
  Chunk* tail_ = nullptr;
};

}  // namespace ember::engine::internal
