#include "storage/internal/cpu_storage.h"

#include <cstdlib>
#include <limits>
#include <new>

#include <fmt/format.h>

#include "engine/base/mutex.h"
#include "storage/internal/fences.h"
#include "storage/internal/memory_counters.h"

namespace ember::storage::internal {
namespace {

constexpr std::size_t kAlignment = 64;

class CpuStorage final : public StorageManager {
 public:
  CpuStorage() : StorageManager(MemoryKind::kCpu, -1) {}

  MemoryStats Stats() const override {
    MutexLock lock(&mu_);
    return counters_.stats();
  }
  void ResetPeaks() override {
    MutexLock lock(&mu_);
    counters_.ResetPeaks();
  }
  void ReleaseCached() override {}

 private:
  Block Take(std::size_t bytes, void* /*stream*/) override {
    if (bytes > std::numeric_limits<std::size_t>::max() - kAlignment) Fail(bytes, bytes);
    const std::size_t size = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    void* data = std::aligned_alloc(kAlignment, size);
    if (data == nullptr) Fail(bytes, size);
    MutexLock lock(&mu_);
    counters_.Reserve(size);
    counters_.HandOut(size);
    return Block{data, size, {}};
  }

  // A caller that recorded GPU use of pageable memory gets it freed only
  // after that use.
  void Give(Block block) override {
    HostWait(block.pending);
    std::free(block.data);
    MutexLock lock(&mu_);
    counters_.TakeBack(block.capacity);
    counters_.Unreserve(block.capacity);
  }

  [[noreturn]] void Fail(std::size_t asked, std::size_t size) const {
    throw OutOfMemory(
        fmt::format("[cpu storage] out of memory: asked for {} bytes ({} aligned); {}", asked, size,
                    Stats().ToString()));
  }

  mutable Mutex mu_;
  MemoryCounters counters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<StorageManager> MakeCpuStorage() { return std::make_unique<CpuStorage>(); }

}  // namespace ember::storage::internal
