#pragma once

// The cases of ember-bench-storage: Ember's device memory managers side by
// side with CUDA's own allocators, all on device 0 and one stream per
// thread. The columns (--allocators):
//
//   Ember round  CreateStorageManager(kDevice, 0, {device_pool = kRound}):
//                Ember's caching pool; Alloc(bytes, stream), RecordUse,
//                Reset.
//   Ember async  the same with device_pool = kCudaAsync (Ember over CUDA's
//                stream-ordered allocator).
//   MallocAsync  cudaMallocFromPoolAsync / cudaFreeAsync on a cudaMemPool_t
//                of the bench's own whose release threshold is UINT64_MAX,
//                so that it caches everything: its best case. (That is what
//                cudaMallocAsync does with the device's current pool; a pool
//                of its own leaves the default pool to Ember async.)
//   cudaMalloc   cudaMalloc / cudaFree.
//
// The cases (each column in turn, same sizes in the same order, --repeat
// runs round-robin over the columns; warm-up untimed):
//
//   reuse    --pairs alloc+free pairs of sizes drawn from --sizes in a fixed
//            pseudo-random order, --live buffers alive at once (each alloc
//            frees the oldest first). A throughput pass (no clock reads in
//            the loop, timed until the stream is idle) and a latency pass
//            (each alloc and each free timed on its own).
//   busy     --busy_samples times: alloc --busy_bytes, launch a --busy_us
//            kernel that writes it, free it and time the free on the host;
//            then ask the stream whether the kernel is still running. A free
//            that does not block returns in microseconds with the kernel
//            still running; cudaFree waits for the kernel.
//   threads  --threads threads, a stream each, --thread_pairs pairs each
//            of the reuse case at once on one allocator: aggregate pairs/s.
//            cudaMalloc is left out (the issue compares the pool and
//            cudaMallocAsync).
//   profile  (--profile=PATH) the busy case through an engine with
//            profiling: a GPU op launches the kernel on the buffer, then
//            DeleteVariable with a GPU context whose on_delete calls
//            RecordUse(stream) and Reset(). The trace is read back: the
//            delete op's host span should be short and end while the
//            kernel's GPU span still runs. Ember columns only, once.
//
// A build without CUDA links storage_cases_stub.cc, whose RunStorageCases
// only says so.
//
// Thread safety: the bench's main thread only.

#include <cstddef>
#include <string>
#include <vector>

#include "tools/bench/common/results.h"
#include "tools/bench/common/table.h"

namespace ember::bench {

// The --allocators names, in column order.
inline constexpr const char* kAllocatorNames[] = {"round", "cuda_async", "malloc_async", "malloc"};

struct StorageBenchOptions {
  std::vector<std::string> allocators = {"round", "cuda_async", "malloc_async", "malloc"};
  std::vector<std::size_t> sizes;  // bytes, each > 0
  int pairs = 10'000;
  int live = 4;
  int busy_us = 5'000;
  int busy_samples = 20;
  std::size_t busy_bytes = 1 << 20;
  int threads = 4;
  int thread_pairs = 10'000;
  int repeat = 5;
  bool reuse = true;
  bool busy = true;
  bool threaded = true;
  std::string profile_path;  // empty: no profile case
  std::string profile_engine = "ThreadedEnginePerDeviceAsync";
};

struct StorageCasesResult {
  Table table;          // medians of the runs, ratios, targets, notes
  Results samples;      // every run's figures
  std::string device;   // the device, or empty when nothing ran
  std::string skipped;  // why nothing ran, or empty
};

// Runs the cases and returns the table. Without a GPU, or in a build without
// CUDA, runs nothing and says why in `skipped`. Progress goes to stderr.
// Throws CudaError (naming the call) for a failed CUDA call, Error for a
// storage or engine error.
StorageCasesResult RunStorageCases(const StorageBenchOptions& options);

}  // namespace ember::bench
