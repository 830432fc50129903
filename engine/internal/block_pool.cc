#include "engine/internal/block_pool.h"

#include <new>

#include <concurrentqueue/concurrentqueue.h>

namespace ember::engine::internal {
namespace {

constexpr std::size_t kMaxPooled = 1 << 14;

moodycamel::ConcurrentQueue<void*>& FreeList() {
  // Leaked on purpose: blocks may be freed during static destruction.
  static auto* const free_list = new moodycamel::ConcurrentQueue<void*>(1024);
  return *free_list;
}

}  // namespace

void* BlockPool::Allocate(std::size_t size) {
  void* memory = nullptr;
  if (FreeList().try_dequeue(memory)) return memory;
  return ::operator new(size);
}

void BlockPool::Free(void* memory, std::size_t /*size*/) {
  if (FreeList().size_approx() < kMaxPooled && FreeList().enqueue(memory)) return;
  ::operator delete(memory);
}

}  // namespace ember::engine::internal
