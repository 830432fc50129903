// CreateStorageManager, GetStorage and StorageOptions::FromEnv.

#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

#include <absl/container/flat_hash_map.h>
#include <absl/strings/numbers.h>
#include <fmt/format.h>

#include "engine/base/device.h"
#include "engine/base/mutex.h"
#include "engine/error.h"
#include "storage/internal/cpu_storage.h"
#include "storage/internal/gpu_storage.h"
#include "storage/storage.h"

namespace ember::storage {
namespace {

void Validate(const StorageOptions& options) {
  const std::size_t page = options.page_size;
  if (page < 256 || (page & (page - 1)) != 0) {
    throw InvalidArgument(fmt::format(
        "[CreateStorageManager] page_size {} must be a power of two of at least 256", page));
  }
  if (options.round_cutoff < 12 || options.round_cutoff > 40 ||
      (std::size_t{1} << options.round_cutoff) < page) {
    throw InvalidArgument(fmt::format(
        "[CreateStorageManager] round_cutoff {} must be in [12, 40] and 2^cutoff >= page_size",
        options.round_cutoff));
  }
  if (options.reserve_percent < 0 || options.reserve_percent > 90) {
    throw InvalidArgument(fmt::format(
        "[CreateStorageManager] reserve_percent {} must be in [0, 90]", options.reserve_percent));
  }
}

void CheckDevice(MemoryKind kind, int device, std::string_view where = "CreateStorageManager") {
  const int gpus = GpuCount();
  if (device >= 0 && device < gpus) return;
  throw Unavailable(fmt::format("[{}] {} memory on gpu({}): this machine has {} GPU(s)", where,
                                ToString(kind), device, gpus));
}

// The value of `name` if set and not empty.
const char* Env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

template <typename T>
T ParseEnum(const char* name, const char* value,
            std::initializer_list<std::pair<const char*, T>> choices) {
  std::string valid;
  for (const auto& [text, choice] : choices) {
    if (std::string_view(value) == text) return choice;
    valid += valid.empty() ? text : fmt::format(", {}", text);
  }
  throw InvalidArgument(
      fmt::format("[StorageOptions::FromEnv] {}='{}' is not one of: {}", name, value, valid));
}

int64_t ParseInt(const char* name, const char* value) {
  int64_t parsed = 0;
  if (!absl::SimpleAtoi(value, &parsed)) {
    throw InvalidArgument(
        fmt::format("[StorageOptions::FromEnv] {}='{}' is not an integer", name, value));
  }
  return parsed;
}

}  // namespace

StorageOptions StorageOptions::FromEnv() {
  StorageOptions options;
  if (const char* v = Env("EMBER_GPU_MEM_POOL_TYPE")) {
    options.device_pool = ParseEnum<DevicePoolType>("EMBER_GPU_MEM_POOL_TYPE", v,
                                                    {{"Round", DevicePoolType::kRound},
                                                     {"Naive", DevicePoolType::kNaive},
                                                     {"CudaAsync", DevicePoolType::kCudaAsync}});
  }
  if (const char* v = Env("EMBER_GPU_MEM_POOL_ROUND_CUTOFF")) {
    options.round_cutoff = static_cast<int>(ParseInt("EMBER_GPU_MEM_POOL_ROUND_CUTOFF", v));
  }
  if (const char* v = Env("EMBER_GPU_MEM_POOL_PAGE_SIZE")) {
    options.page_size = static_cast<std::size_t>(ParseInt("EMBER_GPU_MEM_POOL_PAGE_SIZE", v));
  }
  if (const char* v = Env("EMBER_GPU_MEM_POOL_RESERVE")) {
    options.reserve_percent = static_cast<int>(ParseInt("EMBER_GPU_MEM_POOL_RESERVE", v));
  }
  if (const char* v = Env("EMBER_UVM_MODE")) {
    options.uvm_mode = ParseEnum<UvmMode>(
        "EMBER_UVM_MODE", v,
        {{"auto", UvmMode::kAuto}, {"managed", UvmMode::kManaged}, {"mapped", UvmMode::kMapped}});
  }
  try {
    Validate(options);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("[StorageOptions::FromEnv] {}", e.what()));
  }
  return options;
}

std::unique_ptr<StorageManager> CreateStorageManager(MemoryKind kind, int device,
                                                     const StorageOptions& options) {
  Validate(options);
  switch (kind) {
    case MemoryKind::kCpu:
      return internal::MakeCpuStorage();
    case MemoryKind::kPinned:
      return internal::MakePinnedPool(options);
    case MemoryKind::kDevice:
      CheckDevice(kind, device);
      return options.device_pool == DevicePoolType::kCudaAsync
                 ? internal::MakeCudaAsyncPool(device)
                 : internal::MakeDevicePool(device, options);
    case MemoryKind::kUvm:
      CheckDevice(kind, device);
      return internal::MakeUvmPool(device, options);
  }
  throw InvalidArgument("[CreateStorageManager] unknown memory kind");
}

// Made on first use and never destroyed: buffers may be released while the
// process exits, after static destructors would have run.
std::size_t DeviceFreeBytes(int device) {
  const int gpus = GpuCount();
  if (device < 0 || device >= gpus) {
    throw Unavailable(
        fmt::format("[DeviceFreeBytes] gpu({}) is not available: {} GPU(s)", device, gpus));
  }
  return internal::FreeBytes(device);
}

StorageManager& GetStorage(MemoryKind kind, int device) {
  static auto* mu = new Mutex();
  static auto* managers =
      new absl::flat_hash_map<std::pair<int, int>, std::unique_ptr<StorageManager>>();
  // One kCpu manager; the others one per GPU (for kPinned: the GPU whose
  // streams fence its blocks, EngineOptions::host_memory_gpu).
  if (kind == MemoryKind::kPinned && GpuCount() > 0) CheckDevice(kind, device, "GetStorage");
  const std::pair<int, int> key{static_cast<int>(kind), kind == MemoryKind::kCpu ? -1 : device};
  MutexLock lock(mu);
  auto& manager = (*managers)[key];
  if (manager == nullptr)
    manager = CreateStorageManager(kind, key.second, StorageOptions::FromEnv());
  return *manager;
}

}  // namespace ember::storage
