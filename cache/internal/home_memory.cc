#include "cache/internal/home_memory.h"

#include <map>
#include <memory>
#include <utility>

#include "engine/base/mutex.h"
#include "storage/storage.h"

namespace ember::cache::internal {
namespace {

storage::UvmMode ModeFor(int device, HomeMemory home, std::size_t bytes) {
  switch (home) {
    case HomeMemory::kManaged:
      return storage::UvmMode::kManaged;
    case HomeMemory::kMapped:
      return storage::UvmMode::kMapped;
    case HomeMemory::kAuto:
      break;
  }
  return bytes <= storage::DeviceFreeBytes(device) / 2 ? storage::UvmMode::kAuto
                                                       : storage::UvmMode::kMapped;
}

}  // namespace

storage::StorageManager& HomeMemoryFor(engine::Context ctx, HomeMemory home, std::size_t bytes) {
  if (!ctx.is_gpu()) return storage::GetStorage(storage::MemoryKind::kCpu);
  const storage::UvmMode mode = ModeFor(ctx.device_id, home, bytes);
  // Leaked on purpose (see home_memory.h).
  static auto* mu = new Mutex();
  static auto* managers =
      new std::map<std::pair<int, int>, std::unique_ptr<storage::StorageManager>>();
  MutexLock lock(mu);
  auto& manager = (*managers)[{ctx.device_id, static_cast<int>(mode)}];
  if (manager == nullptr) {
    storage::StorageOptions options = storage::StorageOptions::FromEnv();
    options.uvm_mode = mode;
    manager = storage::CreateStorageManager(storage::MemoryKind::kUvm, ctx.device_id, options);
  }
  return *manager;
}

}  // namespace ember::cache::internal
