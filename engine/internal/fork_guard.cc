#include "engine/internal/fork_guard.h"

#include <pthread.h>

#include <atomic>

namespace ember::engine::internal {
namespace {

std::atomic<uint64_t> fork_generation{0};

void OnForkChild() { fork_generation.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

uint64_t ForkGeneration() {
  static const bool registered = [] {
    pthread_atfork(nullptr, nullptr, &OnForkChild);
    return true;
  }();
  (void)registered;
  return fork_generation.load(std::memory_order_relaxed);
}

}  // namespace ember::engine::internal
