#include "storage/internal/caching_pool.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "engine/base/logging.h"
#include "storage/internal/fences.h"

namespace ember::storage::internal {
namespace {

// How many cached blocks of a class Take inspects for one it need not wait
// for (each costs a cudaEventQuery per fence).
constexpr std::size_t kScan = 4;

bool ReadyFor(std::vector<Fence>& fences, void* stream) {
  const bool all_on_stream =
      stream != nullptr && std::all_of(fences.begin(), fences.end(), [stream](const Fence& fence) {
        return fence.stream == stream;
      });
  return all_on_stream || DropPassed(fences);
}

}  // namespace

CachingPool::CachingPool(MemoryKind kind, int device, SizeClasses classes,
                         std::unique_ptr<SystemMemory> system)
    : StorageManager(kind, device), classes_(classes), system_(std::move(system)) {}

CachingPool::~CachingPool() {
  ReleaseCached();
  MutexLock lock(&mu_);
  if (counters_.stats().allocated != 0) {
    Log().error("{} destroyed with {} bytes still handed out (leaked)", Where(),
                counters_.stats().allocated);
  }
}

StorageManager::Block CachingPool::Take(std::size_t bytes, void* stream) {
  const std::size_t size = classes_.Round(bytes);
  Block block = TakeCached(size, stream);
  if (block.data != nullptr) return block;
  block.data = AllocateFromSystem(size, bytes);
  block.capacity = size;
  MutexLock lock(&mu_);
  counters_.Reserve(size);
  counters_.HandOut(size);
  return block;
}

StorageManager::Block CachingPool::TakeCached(std::size_t size, void* stream) {
  MutexLock lock(&mu_);
  auto it = cached_.find(size);
  if (it == cached_.end() || it->second.empty()) return {};
  std::vector<Block>& blocks = it->second;
  auto chosen = blocks.end() - 1;
  for (std::size_t i = 0; i < std::min(kScan, blocks.size()); ++i) {
    auto candidate = blocks.end() - 1 - static_cast<std::ptrdiff_t>(i);
    if (ReadyFor(candidate->pending, stream)) {
      chosen = candidate;
      break;
    }
  }
  Block block = std::move(*chosen);
  blocks.erase(chosen);
  counters_.HandOut(size);
  return block;
}

void CachingPool::Give(Block block) {
  MutexLock lock(&mu_);
  counters_.TakeBack(block.capacity);
  cached_[block.capacity].push_back(std::move(block));
}

void* CachingPool::AllocateFromSystem(std::size_t size, std::size_t asked) {
  if (system_->WouldCrossReserve(size)) ReleaseCached();
  void* data = system_->Allocate(size);
  if (data == nullptr) {
    ReleaseCached();
    data = system_->Allocate(size);
  }
  if (data == nullptr) {
    throw OutOfMemory(fmt::format("[{}] out of memory: asked for {} bytes ({} as a block); {}; {}",
                                  Where(), asked, size, Stats().ToString(), system_->Describe()));
  }
  return data;
}

// Frees outside the lock: a system free may synchronize the device.
void CachingPool::ReleaseCached() {
  std::vector<Block> released;
  {
    MutexLock lock(&mu_);
    for (auto& [size, blocks] : cached_) {
      for (Block& block : blocks) released.push_back(std::move(block));
    }
    cached_.clear();
  }
  for (Block& block : released) {
    HostWait(block.pending);
    system_->Free(block.data);
  }
  MutexLock lock(&mu_);
  for (const Block& block : released) counters_.Unreserve(block.capacity);
}

MemoryStats CachingPool::Stats() const {
  MutexLock lock(&mu_);
  return counters_.stats();
}

void CachingPool::ResetPeaks() {
  MutexLock lock(&mu_);
  counters_.ResetPeaks();
}

std::string CachingPool::Where() const {
  return device() >= 0 ? fmt::format("{} storage on gpu({})", ToString(kind()), device())
                       : fmt::format("{} storage", ToString(kind()));
}

}  // namespace ember::storage::internal
