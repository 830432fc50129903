#pragma once

// What the engine knows about the calling thread: whether it is an engine
// worker and which op (if any) it is running. Used to refuse waits from
// inside ops (they could deadlock), to keep pushes from ops and workers from
// blocking on the in-flight bound, and to bound inline execution depth.

namespace ember::engine::internal {

struct OprBlock;
class WorkerPool;

struct ThreadState {
  const OprBlock* running_op = nullptr;
  bool is_worker = false;
  int inline_depth = 0;
  // Worker threads: their pool, and the op they made ready to run next.
  const WorkerPool* pool = nullptr;
  int gpu_device = -1;  // GPU pool workers: their device
  OprBlock* continuation = nullptr;
  WorkerPool* continuation_pool = nullptr;  // the pool `continuation` belongs to
};

inline ThreadState& CurrentThread() {
  thread_local ThreadState state;
  return state;
}

}  // namespace ember::engine::internal
