#pragma once

// EngineType names the engines; EngineOptions holds every knob an engine
// takes. Options are plain values: the library reads the environment in one
// place only, EngineOptions::FromEnv(), whose variables are listed (with
// defaults) in docs/configuration.md.
//
// Thread safety: plain values.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ember::engine {

enum class EngineType {
  kNaive,              // NaiveEngine: every op runs synchronously on the pusher
  kThreaded,           // ThreadedEngine: one shared worker pool
  kThreadedPerDevice,  // ThreadedEnginePerDevice: per-device pools (default)
};

// The canonical name, e.g. "ThreadedEnginePerDevice".
std::string_view ToString(EngineType type);

struct EngineOptions {
  EngineType type = EngineType::kThreadedPerDevice;
  // The "...Async" engines: GPU dependencies through CUDA events instead of a
  // host sync after each GPU op. Parsed and kept; acted on by the GPU workers.
  bool async_gpu = false;

  int cpu_workers = 1;           // ThreadedEnginePerDevice: normal CPU workers
  int cpu_priority_workers = 2;  // ThreadedEnginePerDevice: CPU priority workers
  int pool_workers = 2;          // ThreadedEngine: workers of the shared pool
  // ThreadedEnginePerDevice, per GPU: normal workers, copy-in and copy-out
  // workers (each kind gets this many), priority workers.
  int gpu_workers = 2;
  int gpu_copy_workers = 1;
  int gpu_priority_workers = 2;
  // The Async engines: most CUDA events per stream. Events are reused once the
  // GPU has passed them; a stream this many ops behind makes the next op's
  // worker wait on the host for its oldest.
  int gpu_event_pool_size = 256;
  // ThreadedEnginePerDevice: GPU workers' streams at ranked priorities, the
  // copy pools' lowest (see StreamRank in engine/internal/gpu_fence.h), so
  // that waiting blocks of SM-bound copies start after those of the step's
  // kernels. False: every stream at CUDA's default priority.
  bool gpu_stream_priorities = true;
  // How long an idle GPU worker polls its queue before it sleeps: a chain of
  // GPU ops handed between workers then never waits for a wake-up.
  int gpu_worker_spin_us = 50;
  // How long an idle CPU worker (every CPU pool, and ThreadedEngine's shared
  // pool) polls its queue before it sleeps. While a thread keeps pushing, a
  // worker that runs out of work finds the next op within this window and
  // never goes through the kernel (a sleep and a wake-up cost a system call
  // on each side); once pushing stops it sleeps, so an idle engine uses no
  // CPU. The poll pauses and yields, so a pusher sharing its core still runs.
  int cpu_worker_spin_us = 100;
  // Bound on pushed-but-unfinished ops. A thread that is not an engine worker
  // blocks in Push* while this many are in flight; workers never block.
  int max_in_flight = 1 << 16;
  // Past this many pushed-but-unfinished ops (0: never), a thread that may
  // block in Push* polls until the backlog has drained to three quarters of
  // it, so that the ops it queues are still in cache when a worker runs
  // them. It never sleeps for it, and stops pacing while no op finishes
  // (a long op, or one waiting for the pusher), so pacing cannot deadlock.
  int pace_in_flight = 1024;
  int bulk_size = 0;  // default per-thread bulk size of PushSync (0: off)
  // The GPU whose streams order the reuse of this engine's pinned host
  // memory (a pinned tensor's first-use and release fences), and whose
  // pinned pool it comes from (storage::GetStorage). A process that drives
  // one GPU per engine, as the ranks of a sharded run do, names each
  // engine's own GPU: no engine then runs work on another rank's GPU or
  // waits for its fences, which could sit behind that rank's collectives.
  int host_memory_gpu = 0;
  // When set, the engine writes a Chrome-trace profile of every op here when
  // it is destroyed (see docs/profiling.md).
  std::string profile_path;

  // Options from the environment (ENGINE_TYPE, or MXNet's MXNET_ENGINE_TYPE
  // when ENGINE_TYPE is unset; EMBER_*), defaults elsewhere.
  // Throws InvalidArgument naming the variable for an unknown engine name or
  // a value that is not a number in range.
  static EngineOptions FromEnv();
};

// Parses an engine name: "NaiveEngine", "ThreadedEngine",
// "ThreadedEnginePerDevice", each optionally with the suffix "Async".
// Throws InvalidArgument listing the valid names.
EngineOptions ParseEngineType(std::string_view name, EngineOptions base = {});

// Every valid ENGINE_TYPE value, in a stable order.
std::vector<std::string> EngineTypeNames();

}  // namespace ember::engine
