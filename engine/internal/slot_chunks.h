#pragma once

// SlotChunks<T>: objects numbered by a var's slot, in fixed chunks made on
// first use and kept until the table goes, so a lookup takes no lock and an
// object never moves. The var table and the GPU backend's SyncObject table
// are both one of these, so the number of var slots is set here only.
//
// Thread safety: Find and At are thread-safe; a chunk is made under a mutex
// and published with release, read with acquire.

#include <array>
#include <atomic>
#include <cstdint>

#include "engine/base/mutex.h"

namespace ember::engine::internal {

// Slots are 24 bits of a VarHandle (var_table.h).
inline constexpr int kSlotBits = 24;
inline constexpr uint32_t kMaxSlots = 1u << kSlotBits;

template <typename T>
class SlotChunks {
 public:
  SlotChunks() = default;
  SlotChunks(const SlotChunks&) = delete;
  SlotChunks& operator=(const SlotChunks&) = delete;
  ~SlotChunks() {
    for (auto& chunk : chunks_) delete[] chunk.load(std::memory_order_relaxed);
  }

  // The object of `slot`, or null when its chunk was never made.
  // REQUIRES: slot < kMaxSlots.
  [[nodiscard]] T* Find(uint32_t slot) const {
    T* chunk = chunks_[slot >> kChunkBits].load(std::memory_order_acquire);
    return chunk == nullptr ? nullptr : &chunk[slot & (kChunkSize - 1)];
  }

  // The object of `slot`, making its chunk if needed; each object of a new
  // chunk is passed to `init` with its slot first. REQUIRES: slot < kMaxSlots.
  template <typename Init>
  T& At(uint32_t slot, Init&& init) {
    if (T* found = Find(slot)) return *found;
    MutexLock lock(&mu_);
    auto& chunk = chunks_[slot >> kChunkBits];
    T* objects = chunk.load(std::memory_order_relaxed);
    if (objects == nullptr) {
      objects = new T[kChunkSize];
      const uint32_t first = slot & ~(kChunkSize - 1);
      for (uint32_t i = 0; i < kChunkSize; ++i) init(objects[i], first + i);
      chunk.store(objects, std::memory_order_release);
    }
    return objects[slot & (kChunkSize - 1)];
  }
  T& At(uint32_t slot) {
    return At(slot, [](T&, uint32_t) {});
  }

 private:
  static constexpr int kChunkBits = 12;
  static constexpr uint32_t kChunkSize = 1u << kChunkBits;

  std::array<std::atomic<T*>, (kMaxSlots >> kChunkBits)> chunks_{};
  Mutex mu_;
};

}  // namespace ember::engine::internal
