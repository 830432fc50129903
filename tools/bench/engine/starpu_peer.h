#pragma once

// The StarPU peer of ember-bench-engine. StarPU is the closest peer to the
// engine: it too infers dependencies from the data each task names
// ("implicit data dependencies", sequential consistency), so it runs a random
// workload the same way the engine does: one data handle per var and one
// task per op, with STARPU_R on the op's reads and STARPU_W (STARPU_RW if it
// also reads it) on its write.
//
// StarPU's runtime is process-wide: at most one StarPUPeer may exist at a
// time. Its idle CPU workers poll, burning their cores, so keep a peer alive
// only while it runs; starting one takes milliseconds and is not timed.
//
// Thread safety: a StarPUPeer is used from one thread.

#include <cstdint>
#include <string>
#include <vector>

#include "engine/testing/random_workload.h"

namespace ember::bench {

// Whether this binary was built with StarPU (EMBER_BUILD_BENCH_PEERS and
// starpu-1.3 found by pkg-config at configure time).
[[nodiscard]] bool StarPUPeerBuilt();

class StarPUPeer {
 public:
  // Starts StarPU with `cpus` CPU workers and no CUDA or OpenCL workers,
  // silencing its banner. Throws Unavailable when the peer was not built or
  // starpu_init fails. REQUIRES: no other StarPUPeer exists.
  explicit StarPUPeer(int cpus);
  StarPUPeer(const StarPUPeer&) = delete;
  StarPUPeer& operator=(const StarPUPeer&) = delete;
  // Shuts StarPU down.
  ~StarPUPeer();

  // Runs `workload` once: each task computes ApplyOp into `*data`, which must
  // hold the initial data and ends up with the final data. Returns the wall
  // time in seconds from the first submission to the end of
  // starpu_task_wait_for_all; registering the vars' handles is not timed.
  double Run(const engine::testing::Workload& workload, std::vector<uint64_t>* data);

  // E.g. "StarPU 1.3.10, scheduler lws, 2 CPU workers".
  [[nodiscard]] std::string description() const { return description_; }

 private:
  std::string description_;
};

}  // namespace ember::bench
