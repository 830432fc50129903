#include "engine/internal/block_pool.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <new>

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

// Blocks set aside by Reserve, linked through their first word.
struct Reserved {
  void* head = nullptr;
  std::size_t count = 0;

  void Push(void* block) {
    *static_cast<void**>(block) = head;
    head = block;
    ++count;
  }
  void* Pop() {
    assert(count > 0 && "TakeReserved without a block set aside");
    void* block = head;
    head = *static_cast<void**>(block);
    --count;
    return block;
  }
};

// One thread's free blocks of one class: at most 2 * kBatch, in a fixed
// array (a growing vector would allocate on a thread's first frees); the
// older half goes to the shared queue. Trivially destructible members only,
// so that nothing is left to misuse once the cache is gone (see
// cache_released).
class ClassCache {
 public:
  void* Take(int size_class) {
    if (count_ == 0) Refill(size_class);
    if (count_ == 0) return HeapAllocate(kClassBytes[size_class]);
    void* block = blocks_[--count_];
    if (count_ > 0) PrefetchBlock(blocks_[count_ - 1], kClassBytes[size_class]);
    return block;
  }

  void Put(int size_class, void* block) {
    if (count_ == blocks_.size()) Spill(size_class);
    blocks_[count_++] = block;
  }

  void Reserve(int size_class, std::size_t count) {
    while (reserved_.count < count) reserved_.Push(Take(size_class));
  }
  void* TakeReserved() { return reserved_.Pop(); }
  void TrimReserve(int size_class, std::size_t keep) {
    while (reserved_.count > keep) Put(size_class, reserved_.Pop());
  }

  void Release(int size_class) {
    TrimReserve(size_class, 0);
    for (std::size_t i = 0; i < count_; ++i) FreeShared(size_class, blocks_[i]);
    count_ = 0;
  }

  static void* TakeShared(int size_class) {
    void* block = nullptr;
    if (Shared(size_class).try_dequeue(block)) return block;
    return HeapAllocate(kClassBytes[size_class]);
  }
  static void FreeShared(int size_class, void* block) {
    if (SharedFull(size_class) || !Shared(size_class).enqueue(block)) HeapFree(block);
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
  Reserved reserved_;
};

// Whether this thread's cache is gone. A thread's thread_locals are
// destroyed in the reverse order of their construction, so another one's
// destructor may free or take blocks after the cache's ran (the bulk that
// flushes at thread exit, bulk.cc, made before the cache on most threads);
// from then on this thread goes to the shared queues directly. A plain
// bool: it has no destructor, so it outlives every thread_local object.
thread_local bool cache_released = false;

struct ThreadCache {
  std::array<ClassCache, kClassBytes.size()> classes;
  ~ThreadCache() {
    for (std::size_t c = 0; c < classes.size(); ++c) classes[c].Release(static_cast<int>(c));
    cache_released = true;
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
  if (cache_released) return ClassCache::TakeShared(size_class);
  return Cache().classes[size_class].Take(size_class);
}

void BlockPool::Free(void* memory, std::size_t size) {
  const int size_class = ClassOf(size);
  if (size_class == kNoClass) return HeapFree(memory);
  if (cache_released) return ClassCache::FreeShared(size_class, memory);
  Cache().classes[size_class].Put(size_class, memory);
}

// Once the cache is gone nothing is set aside (it would have no owner left
// to free it): TakeReserved allocates then, which only a push from a
// thread_local's destructor at thread exit ever meets.
void BlockPool::Reserve(std::size_t size, std::size_t count) {
  const int size_class = ClassOf(size);
  assert(size_class != kNoClass && "only small blocks are set aside");
  if (cache_released) return;
  Cache().classes[size_class].Reserve(size_class, count);
}

void* BlockPool::TakeReserved(std::size_t size) {
  const int size_class = ClassOf(size);
  if (cache_released) return ClassCache::TakeShared(size_class);
  return Cache().classes[size_class].TakeReserved();
}

void BlockPool::TrimReserve(std::size_t size, std::size_t keep) {
  if (cache_released) return;
  const int size_class = ClassOf(size);
  Cache().classes[size_class].TrimReserve(size_class, keep);
}

}  // namespace ember::engine::internal
