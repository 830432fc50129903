// A build without CUDA: no GPUs, no pinned or unified memory, and no streams
// (so there are never fences).

#include <fmt/format.h>

#include "engine/error.h"
#include "storage/internal/fences.h"
#include "storage/internal/gpu_storage.h"

namespace ember::storage::internal {
namespace {

[[noreturn]] void NoCuda(MemoryKind kind) {
  throw Unavailable(fmt::format("[CreateStorageManager] {} memory needs CUDA; this build has none",
                                ToString(kind)));
}

}  // namespace

std::size_t FreeBytes(int device) {
  throw Unavailable(fmt::format("[DeviceFreeBytes] gpu({}): this build has no CUDA", device));
}

std::unique_ptr<StorageManager> MakePinnedPool(const StorageOptions&) {
  NoCuda(MemoryKind::kPinned);
}
std::unique_ptr<StorageManager> MakeDevicePool(int, const StorageOptions&) {
  NoCuda(MemoryKind::kDevice);
}
std::unique_ptr<StorageManager> MakeCudaAsyncPool(int) { NoCuda(MemoryKind::kDevice); }
std::unique_ptr<StorageManager> MakeUvmPool(int, const StorageOptions&) {
  NoCuda(MemoryKind::kUvm);
}

std::vector<Fence> RecordFences(const std::vector<void*>&) { return {}; }
void OrderAfter(std::vector<Fence>& fences, void*) { fences.clear(); }
bool DropPassed(std::vector<Fence>& fences) {
  fences.clear();
  return true;
}
void HostWait(std::vector<Fence>& fences) { fences.clear(); }

}  // namespace ember::storage::internal
