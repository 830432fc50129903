#pragma once

// CachingPool: a StorageManager that keeps released blocks by size class
// and hands them out again, after their fences (MXNet's pooled storage
// manager, with event-ordered reuse).
//
// Reuse order: among cached blocks of the class, one whose fences are all
// on the caller's stream or already passed is preferred (nothing to wait
// for); otherwise the newest, whose fences the caller then orders on.
// When the system is out of memory (or the next allocation would eat into
// the reserve), the cache is released and the allocation retried once; then
// OutOfMemory says the size asked for, the pool's state and the system's.
//
// Thread safety: thread-safe (one lock; system calls are made outside it).

#include <cstddef>
#include <memory>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "storage/internal/memory_counters.h"
#include "storage/internal/size_classes.h"
#include "storage/internal/system_memory.h"
#include "storage/storage_manager.h"

#include "engine/base/mutex.h"

namespace ember::storage::internal {

class CachingPool final : public StorageManager {
 public:
  CachingPool(MemoryKind kind, int device, SizeClasses classes,
              std::unique_ptr<SystemMemory> system);
  ~CachingPool() override;

  [[nodiscard]] MemoryStats Stats() const override;
  void ResetPeaks() override;
  void ReleaseCached() override;

 private:
  Block Take(std::size_t bytes, void* stream) override;
  void Give(Block block) override;

  // A cached block of `size`, or one with no data.
  Block TakeCached(std::size_t size, void* stream);
  void* AllocateFromSystem(std::size_t size, std::size_t asked);
  [[nodiscard]] std::string Where() const;

  const SizeClasses classes_;
  const std::unique_ptr<SystemMemory> system_;
  mutable Mutex mu_;
  absl::flat_hash_map<std::size_t, std::vector<Block>> cached_ ABSL_GUARDED_BY(mu_);
  MemoryCounters counters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ember::storage::internal
