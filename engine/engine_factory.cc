// CreateEngine and the process-wide engine.

#include <cstdlib>
#include <memory>

#include <fmt/format.h>

#include "engine/base/device.h"
#include "engine/base/mutex.h"
#include "engine/engine.h"
#include "engine/error.h"
#include "engine/internal/dependency_engine.h"
#include "engine/internal/fork_guard.h"

namespace ember::engine {
namespace {

void Validate(const EngineOptions& options) {
  auto check = [](const char* what, int value, int min) {
    if (value < min) {
      throw InvalidArgument(fmt::format("[CreateEngine] EngineOptions::{} = {} must be at least {}",
                                        what, value, min));
    }
  };
  check("cpu_workers", options.cpu_workers, 1);
  check("cpu_priority_workers", options.cpu_priority_workers, 1);
  check("pool_workers", options.pool_workers, 1);
  check("gpu_workers", options.gpu_workers, 1);
  check("gpu_copy_workers", options.gpu_copy_workers, 1);
  check("gpu_priority_workers", options.gpu_priority_workers, 1);
  check("gpu_event_pool_size", options.gpu_event_pool_size, 1);
  check("gpu_worker_spin_us", options.gpu_worker_spin_us, 0);
  check("cpu_worker_spin_us", options.cpu_worker_spin_us, 0);
  check("max_in_flight", options.max_in_flight, 1);
  check("pace_in_flight", options.pace_in_flight, 0);
  check("bulk_size", options.bulk_size, 0);
  check("host_memory_gpu", options.host_memory_gpu, 0);
  const int gpus = GpuCount();
  if (gpus > 0 && options.host_memory_gpu >= gpus) {
    throw InvalidArgument(fmt::format(
        "[CreateEngine] EngineOptions::host_memory_gpu = {}: this machine has {} GPU(s)",
        options.host_memory_gpu, gpus));
  }
}

// The process-wide engine. It is destroyed (drained, workers joined) by an
// atexit handler rather than a static destructor so that the handler can
// skip it in a forked child, whose copy has no worker threads to join.
struct Global {
  Mutex mu;
  Engine* engine ABSL_GUARDED_BY(mu) = nullptr;
  uint64_t fork_generation ABSL_GUARDED_BY(mu) = 0;
};

Global& TheGlobal() {
  // Leaked on purpose: it must outlive every static that might use it.
  static Global* const global = new Global;
  return *global;
}

// The engine drains its ops while the lock is released, since those ops may
// themselves call Engine::Get().
void DestroyGlobalAtExit() {
  Global& global = TheGlobal();
  Engine* engine = nullptr;
  {
    MutexLock lock(&global.mu);
    if (global.fork_generation == internal::ForkGeneration()) engine = global.engine;
  }
  delete engine;
  MutexLock lock(&global.mu);
  global.engine = nullptr;
}

}  // namespace

std::unique_ptr<Engine> CreateEngine(const EngineOptions& options) {
  Validate(options);
  return std::make_unique<internal::DependencyEngine>(options);
}

Engine& Engine::Get() {
  Global& global = TheGlobal();
  MutexLock lock(&global.mu);
  const uint64_t generation = internal::ForkGeneration();
  if (global.engine == nullptr || global.fork_generation != generation) {
    // After fork() the parent's engine is left alone (leaked in the child):
    // its threads and locks belong to the parent.
    const bool first = global.engine == nullptr;
    global.engine = CreateEngine(EngineOptions::FromEnv()).release();
    global.fork_generation = generation;
    // Registered after the engine exists: making it initialized the CUDA
    // runtime, whose teardown is an exit handler too, and exit runs handlers
    // in reverse order, so the engine drains its GPU work before CUDA unloads.
    if (first) std::atexit(&DestroyGlobalAtExit);
  }
  return *global.engine;
}

}  // namespace ember::engine
