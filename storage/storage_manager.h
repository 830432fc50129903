#pragma once

// StorageManager: one kind of memory on one device (see storage.h for the
// kinds and how to get one). Hands out Buffers and takes them back with the
// events of their last users (buffer.h).
//
// Thread safety: thread-safe.

#include <cstddef>
#include <vector>

#include "storage/buffer.h"
#include "storage/memory.h"

namespace ember::storage {

class StorageManager {
 public:
  StorageManager(MemoryKind kind, int device) : kind_(kind), device_(device) {}
  virtual ~StorageManager() = default;
  StorageManager(const StorageManager&) = delete;
  StorageManager& operator=(const StorageManager&) = delete;

  // A buffer of at least `bytes` bytes (0 gives an empty buffer). It may
  // still carry the previous owners' fences: call OrderFirstUse before
  // touching it. Throws OutOfMemory.
  Buffer Alloc(std::size_t bytes);
  // Alloc, with the first use ordered on `stream` (null: the host): a
  // stream wait for fences of other streams, nothing for fences of `stream`.
  Buffer Alloc(std::size_t bytes, void* stream);

  // REQUIRES (destruction): every buffer of this manager was released.

  [[nodiscard]] virtual MemoryStats Stats() const = 0;
  virtual void ResetPeaks() = 0;
  // Returns cached memory to the system; waits (on the host) for the GPU
  // work still fencing it. Allocations made from the cache are unaffected.
  virtual void ReleaseCached() = 0;

  [[nodiscard]] MemoryKind kind() const { return kind_; }
  [[nodiscard]] int device() const { return device_; }

 protected:
  // What a manager hands out and takes back: memory, and the fences its
  // next user must follow (Give: of its last users; Take: still pending).
  struct Block {
    void* data = nullptr;
    std::size_t capacity = 0;
    std::vector<Fence> pending;
  };
  // A block of at least `bytes` (> 0) whose first use will be on `stream`
  // when known (null: unknown, or the host). Throws OutOfMemory.
  virtual Block Take(std::size_t bytes, void* stream) = 0;
  virtual void Give(Block block) = 0;

 private:
  friend class Buffer;
  Buffer Make(std::size_t bytes, void* stream);
  void Return(Buffer& buffer);

  const MemoryKind kind_;
  const int device_;
};

}  // namespace ember::storage
