#pragma once

// TaskQueue: where ready ops wait for a worker. FifoQueue serves normal pools
// in dispatch order (lock-free, moodycamel); PriorityQueue serves priority
// pools, highest priority first and in push order among equals.
//
// Thread safety: thread-safe. Pop blocks; a null result means closed.

#include <chrono>
#include <cstdint>
#include <memory>
#include <queue>
#include <vector>

#include "engine/internal/mutex.h"

namespace ember::engine::internal {

struct OprBlock;

class TaskQueue {
 public:
  virtual ~TaskQueue() = default;
  virtual void Push(OprBlock* block) = 0;
  // Blocks until an op is available; null once Close() has been called and
  // every consumer has been told (each Pop after Close returns null once).
  virtual OprBlock* Pop() = 0;
  // An op if one is queued now, else null; never blocks.
  virtual OprBlock* TryPop() = 0;
  // Makes `consumers` waiting or later Pop calls return null.
  virtual void Close(int consumers) = 0;
};

// `spin`: how long Pop polls before it sleeps (GPU pools: a chain of GPU ops
// handed between workers would otherwise pay a futex wake-up per hop).
std::unique_ptr<TaskQueue> MakeFifoQueue(std::chrono::microseconds spin = {});
std::unique_ptr<TaskQueue> MakePriorityQueue();

}  // namespace ember::engine::internal
