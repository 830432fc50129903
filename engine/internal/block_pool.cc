#include "engine/internal/block_pool.h"

#include <algorithm>
#include <array>
#include <new>
#include <vector>

#include <concurrentqueue/concurrentqueue.h>

#include "engine/internal/prefetch.h"

namespace ember::engine::internal {
namespace {

constexpr std::size_t kBatch = 32;
// Free blocks kept per class, in bytes: enough for the default in-flight
// bound (65,536 ops) of ops with up to a dozen vars, so that a loop that
// pushes that many ops and waits finds them all again on its next step.
constexpr std::size_t kMaxSharedBytes = std::size_t{64} << 20;
constexpr std::align_val_t kAlign{64};
// Size classes: a var's queue chunk; an op with a few vars, up to about 20,
// up to about 100.
constexpr std::array<std::size_t, 4> kClassBytes = {64, 512, 1024, 4096};
constexpr int kNoClass = -1;

int ClassOf(std::size_t size) {
  for (std::size_t c = 0; c < kClassBytes.size(); ++c) {
    if (size <= kClassBytes[c]) return static_cast<int>(c);
  }
  return kNoClass;
}

void* HeapAllocate(std::size_t size) { return ::operator new(size, kAlign); }
void HeapFree(void* memory) { ::operator delete(memory, kAlign); }

// The block handed out next was usually freed by another thread, so its
// lines sit in that thread's core: fetching them now, for writing, lets the
// transfer overlap the rest of this push instead of stalling the next one
// on its first store (measured: most of Submit's time on the random DAG).
void PrefetchBlock(const void* block, std::size_t bytes) {
  // An op header and a dozen var links at most.
  const std::size_t lines = std::min<std::size_t>(8, bytes / 64);
  for (std::size_t line = 0; line < lines; ++line) {
    PrefetchForWrite(static_cast<const char*>(block) + 64 * line);
  }
}

using SharedQueue = moodycamel::ConcurrentQueue<void*>;

SharedQueue& Shared(int size_class) {
  // Leaked on purpose: blocks may be freed during static destruction.
  static auto* const shared = new std::array<SharedQueue, kClassBytes.size()>{
      SharedQueue(1024), SharedQueue(1024), SharedQueue(1024), SharedQueue(1024)};
  return (*shared)[size_class];
}

bool SharedFull(int size_class) {
  return Shared(size_class).size_approx() * kClassBytes[size_class] >= kMaxSharedBytes;
}

// One thread's free blocks of one class: at most 2 * kBatch, in a fixed
// array (a growing vector would allocate on a thread's first frees); the
// older half goes to the shared queue.
class ClassCache {
 public:
  void* Take(int size_class) {
    if (count_ == 0) Refill(size_class);
    if (count_ == 0) return HeapAllocate(kClassBytes[size_class]);
    void* block = blocks_[--count_];
    if (count_ > 0) PrefetchBlock(blocks_[count_ - 1], kClassBytes[size_class]);
    return block;
  }

  void Reserve(int size_class, std::size_t count) {
    if (reserved_.size() >= count) return;
    reserved_.reserve(count);
    while (reserved_.size() < count) reserved_.push_back(Take(size_class));
  }
  void* TakeReserved() {
    void* block = reserved_.back();
    reserved_.pop_back();
    return block;
  }

  void Put(int size_class, void* block) {
    if (count_ == blocks_.size()) Spill(size_class);
    blocks_[count_++] = block;
  }

  void Release(int size_class) {
    for (void* block : reserved_) Put(size_class, block);
    reserved_.clear();
    for (std::size_t i = 0; i < count_; ++i) {
      if (SharedFull(size_class) || !Shared(size_class).enqueue(blocks_[i])) HeapFree(blocks_[i]);
    }
    count_ = 0;
  }

 private:
  void Refill(int size_class) {
    count_ = Shared(size_class).try_dequeue_bulk(blocks_.data(), kBatch);
  }

  // Hands the older half on and keeps the newer (the most recently freed,
  // still in this core's cache).
  void Spill(int size_class) {
    SharedQueue& shared = Shared(size_class);
    if (SharedFull(size_class) || !shared.enqueue_bulk(blocks_.data(), kBatch)) {
      for (std::size_t i = 0; i < kBatch; ++i) HeapFree(blocks_[i]);
    }
    std::copy(blocks_.begin() + kBatch, blocks_.end(), blocks_.begin());
    count_ -= kBatch;
  }

  std::array<void*, 2 * kBatch> blocks_;
  std::size_t count_ = 0;
  std::vector<void*> reserved_;  // set aside by Reserve
};

struct ThreadCache {
  std::array<ClassCache, kClassBytes.size()> classes;
  ~ThreadCache() {
    for (std::size_t c = 0; c < classes.size(); ++c) classes[c].Release(static_cast<int>(c));
  }
};

ThreadCache& Cache() {
  thread_local ThreadCache cache;
  return cache;
}

}  // namespace

void* BlockPool::Allocate(std::size_t size) {
  const int size_class = ClassOf(size);
  if (size_class == kNoClass) return HeapAllocate(size);
  return Cache().classes[size_class].Take(size_class);
}

void BlockPool::Reserve(std::size_t size, std::size_t count) {
  const int size_class = ClassOf(size);
  if (size_class == kNoClass) throw std::bad_alloc();  // only small blocks are reserved
  Cache().classes[size_class].Reserve(size_class, count);
}

void* BlockPool::TakeReserved(std::size_t size) {
  const int size_class = ClassOf(size);
  return Cache().classes[size_class].TakeReserved();
}

void BlockPool::Free(void* memory, std::size_t size) {
  const int size_class = ClassOf(size);
  if (size_class == kNoClass) return HeapFree(memory);
  Cache().classes[size_class].Put(size_class, memory);
}

}  // namespace ember::engine::internal
