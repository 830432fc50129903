#pragma once

// What the GPU cases of ember-bench-cache share (gpu_cases.cc runs them):
// the run's state, the host-to-GPU references they are set beside, and the
// steady-state step loop of the prefetch, passes and oversize cases.
//
// Timing of a step (StepLoop): the prefetch is pushed and the host waits
// for its locations (WaitForVar through Tensor::WaitToRead): host wall time
// of the prefetch alone, its launch and the wake-up included (tens of
// microseconds). The forward, when there is one, is timed the same way;
// the relookup and the backward, when there is one, follow untimed. The
// backward is what makes a step a training step for the cache: the slots
// it updates are dirty, so the prefetches that evict them write them home.
//
// Thread safety: the bench's main thread only.

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "cache/cached_tbe.h"
#include "engine/engine.h"
#include "storage/tensor.h"
#include "tools/bench/cache/cache_cases.h"
#include "tools/bench/cache/tbe_batches.h"

namespace ember::bench::cache_bench {

inline constexpr char kWho[] = "ember-bench-cache";

// GB/s of the references (0: not measured).
struct H2dFigures {
  double memcpy_gbs = 0;     // cudaMemcpyAsync, pinned to device
  double zero_copy_gbs = 0;  // a kernel reading host-mapped memory in sequence
  double rows_gbs = 0;       // the same, random rows of the prefetch's row size
  // What the prefetch target divides by: the better of memcpy and zero-copy.
  [[nodiscard]] double best() const { return std::max(memcpy_gbs, zero_copy_gbs); }
};

struct GpuRun {
  const CacheBenchOptions& o;
  engine::Engine& engine;
  CacheCasesResult& result;
  H2dFigures h2d;
  double gpu_total_bytes = 0;
};

// The cases (one file each). Each adds its table and summary rows; a case
// that cannot run throws (Unavailable: "not run", anything else: failed).
void RunPrefetchCase(GpuRun& run);
void RunAllHitCase(GpuRun& run);
void RunPassesCase(GpuRun& run);
void RunOversizeCase(GpuRun& run);

using Clock = std::chrono::steady_clock;
[[nodiscard]] double MillisSince(Clock::time_point start);

// What a stretch of steps did, summed over its steps.
struct StepTotals {
  int steps = 0;
  double prefetch_ms = 0;
  double forward_ms = 0;      // 0 without a forward
  cache::CacheCounts counts;  // the prefetches' statistics
};

// What a step does besides its prefetch and relookup.
struct StepWork {
  storage::Tensor* out = nullptr;         // a forward into it, timed
  const storage::Tensor* grad = nullptr;  // an SGD backward with it, untimed
};

// `steps` steps over batches[(first + i) % size] (see the top of the file).
// Reads the statistics before and after (two waits on the state).
StepTotals StepLoop(cache::CachedTbe& tbe, const std::vector<BatchTensors>& batches, int first,
                    int steps, cache::CacheLocations& locations, StepWork work);

// A gradient of zeros for StepWork::grad, on the cache's context: the
// backward changes no value, yet updates (and dirties) every slot of its
// batch, as a training step does.
[[nodiscard]] storage::Tensor ZeroGrad(engine::Engine& engine, const cache::CachedTbe& tbe,
                                       int64_t batch_size);

// Whether the cached forward runs: tried once on `batch` (prefetched and in
// flight). Unavailable or UsageError make it "not run"; any other error
// "failed" (`failed` set); `why` is empty when it ran.
struct ForwardCheck {
  std::string why;
  bool failed = false;
  [[nodiscard]] bool ok() const { return why.empty(); }
  [[nodiscard]] std::string Note() const {
    return (failed ? "cached forward: FAILED: " : "cached forward: not run: ") + why;
  }
};
[[nodiscard]] ForwardCheck CheckCachedForward(cache::CachedTbe& tbe, const ops::TbeBatch& batch,
                                              const cache::CacheLocations& locations,
                                              storage::Tensor& out);

// ops::TbeOptions of the bench's forwards: no validation (batches are made
// valid on the host).
[[nodiscard]] ops::TbeOptions FastForward();

// "1.5 GiB" style.
[[nodiscard]] std::string Gib(double bytes);

}  // namespace ember::bench::cache_bench
