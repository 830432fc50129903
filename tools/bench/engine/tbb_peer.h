#pragma once

// The oneTBB flow-graph peer of ember-bench-engine. It runs a random workload
// the way a TBB user would without a dependency engine: one continue_node per
// op and explicit edges worked out from the ops' read and write sets. The
// benchmark compares the engine, which infers those edges at push time, with
// this hand-built graph.
//
// Thread safety: call from one thread at a time; a run sets TBB's
// process-wide parallelism limit while it lasts.

#include <cstdint>
#include <string>
#include <vector>

#include "engine/testing/random_workload.h"

namespace ember::bench {

// Whether this binary was built with oneTBB (EMBER_BUILD_BENCH_PEERS and TBB
// found at configure time).
[[nodiscard]] bool TbbPeerBuilt();

// The peer's description for the report, e.g. "oneTBB 2021.8 flow graph".
[[nodiscard]] std::string TbbPeerDescription();

// Builds a flow graph for `workload` and runs it on at most `threads` threads
// (the calling thread included). Each op computes ApplyOp into `*data`, which
// must hold the workload's initial data and ends up with the final data.
// Returns the wall time in seconds from the first node built to the end of
// wait_for_all: building the edges is the peer's price for having no engine.
// REQUIRES: TbbPeerBuilt(). Blocks until the graph has run.
double RunOnTbbFlowGraph(const engine::testing::Workload& workload, int threads,
                         std::vector<uint64_t>* data);

}  // namespace ember::bench
