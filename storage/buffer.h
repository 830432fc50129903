#pragma once

// Buffer: memory from a StorageManager, owned. Move-only; destroying it (or
// Reset) gives the memory back to its manager, which hands it out again only
// after the work of its last users.
//
// Streams are `void*` (a cudaStream_t) so that this header needs no CUDA;
// null stands for the host.
//
// Event-ordered reuse, in two halves:
//  - Release: the manager records one CUDA event on every stream the buffer
//    was used on (RecordUse, and the stream its first use was ordered on).
//    Recording never blocks the host.
//  - Reuse: a buffer handed out again carries those events as pending
//    fences; OrderFirstUse(stream) makes `stream` wait for them on the GPU
//    (nothing for fences of the same stream: stream order covers them) or,
//    for the host, waits for them on the host. Until it is called, nothing
//    may touch the memory. StorageManager::Alloc(bytes, stream) does both.
//
// Thread safety: a Buffer is used by one thread at a time.

#include <cstddef>
#include <vector>

#include "storage/memory.h"

namespace ember::storage {

class StorageManager;

// An event recorded on a stream after a buffer's last use there. Opaque
// (cudaStream_t, cudaEvent_t); owned by the manager.
struct Fence {
  void* stream = nullptr;
  void* event = nullptr;
  int device = -1;  // the event's (and stream's) device
};

class Buffer {
 public:
  Buffer() = default;
  ~Buffer() { Reset(); }
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  [[nodiscard]] void* data() const { return data_; }
  [[nodiscard]] std::size_t size() const { return size_; }          // as asked for
  [[nodiscard]] std::size_t capacity() const { return capacity_; }  // as held
  [[nodiscard]] explicit operator bool() const { return data_ != nullptr; }
  [[nodiscard]] MemoryKind kind() const;
  [[nodiscard]] int device() const;  // -1 for host kinds

  // Orders the first use on `stream` (null: the host) after the previous
  // owners' work; see above. Idempotent. Throws CudaError.
  void OrderFirstUse(void* stream);
  [[nodiscard]] bool has_pending() const { return !pending_.empty(); }

  // Notes that work on `stream` uses the buffer, so that release fences it.
  void RecordUse(void* stream);

  // Gives the memory back now (see above); the buffer is empty afterwards.
  void Reset();

 private:
  friend class StorageManager;

  void* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
  StorageManager* owner_ = nullptr;
  std::vector<void*> users_;    // streams to fence on release
  std::vector<Fence> pending_;  // the previous owners' fences
};

}  // namespace ember::storage
