#pragma once

// The GPU cases of ember-bench-engine: engines running GPU ops, side by side
// with the same kernels issued by hand (streams and events, no engine), all
// on device 0. Every kernel is one thread that spins for a set time and
// increments a counter (common/spin_kernel.h); the counters are checked after each
// run, since a fast engine that breaks the order proves nothing.
//
//   chain        chain_ops ops that all write one var, alternating between
//                the kNormal GPU pool and the chain_prop pool, so that every
//                hop crosses workers and streams. Hand-written: two streams
//                and cudaEventRecord / cudaStreamWaitEvent between them, on
//                events made beforehand. Once per kernel length in chain_us,
//                and once more with 0 us kernels on one GPU worker against
//                one stream by hand: the cost per op without the hand-offs.
//   fan-out/in   per round, one op writes X, fan_out ops read X and each
//                writes a var of its own, and one op reads those and writes
//                X; dag_rounds rounds (0: skipped) of dag_kernel_us kernels.
//                Ideal: 3 kernels a round. Hand-written: one stream per
//                branch.
//   independent  independent_ops ops, each writing a var of its own, once
//                per kernel length in independent_us. Hand-written: the
//                kernels back to back on as many streams as the engine has
//                normal GPU workers.
//
// A build without CUDA links gpu_cases_stub.cc, whose RunGpuCases only says
// so.
//
// Thread safety: the bench's main thread only.

#include <string>
#include <vector>

#include "engine/context.h"
#include "tools/bench/common/results.h"
#include "tools/bench/common/table.h"

namespace ember::bench {

struct GpuBenchOptions {
  std::vector<std::string> engines;  // ENGINE_TYPE names
  int repeat = 3;
  int chain_ops = 20'000;
  std::vector<int> chain_us = {0, 10};
  engine::FnProperty chain_prop = engine::FnProperty::kCopyToGPU;
  int dag_rounds = 2'000;
  int fan_out = 8;
  int dag_kernel_us = 50;
  int independent_ops = 10'000;
  std::vector<int> independent_us = {0, 10, 100};
  // Normal GPU workers of each engine; the fan-out case gets at least
  // fan_out, so that every branch can have a stream.
  int gpu_workers = 2;
  // EngineOptions::gpu_event_pool_size of every engine; 0: the default.
  int event_pool_size = 0;
  // When set, each engine writes a profile to <profile_dir>/<case>-<engine>-<run>.json.
  std::string profile_dir;
};

struct GpuCasesResult {
  Table table;            // medians of the runs, ratios, targets, notes
  Results results;        // every run's figures, the ratios included
  bool counts_ok = true;  // every run's counters matched its kernels
};

// Runs every case `repeat` times, round-robin over the engines and the
// hand-written version, and returns the table. Without a GPU, or in a build
// without CUDA, runs nothing and returns a table whose note says why.
// Progress goes to stderr. Throws Error for an engine error or CudaError for
// a failed CUDA call.
GpuCasesResult RunGpuCases(const GpuBenchOptions& options);

}  // namespace ember::bench
