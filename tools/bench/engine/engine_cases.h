#pragma once

// The timed bodies of ember-bench-engine's warm CPU cases, each on an engine
// the caller made (cpu_cases.h runs them, each engine in a process of its
// own). Op bodies do almost nothing, so every figure is the engine's own
// cost per op.
//
//   independent  `ops` no-op ops with no vars: the cost of one push,
//                dispatch and completion, with nothing to order.
//   chain        `ops` no-op ops that all write one var: every op waits for
//                the one before, so this is the dependency hand-off alone.
//   random DAG   dag_push.h through PushAsync.
//   latency      one op at a time on an idle engine: from before the push to
//                the first line of the op's function.
//   idle CPU     what the engine burns while it has nothing to do.
//
// Thread safety: each call uses its engine from the calling thread alone.

#include <cstdint>
#include <vector>

#include "engine/engine.h"
#include "engine/testing/random_workload.h"

namespace ember::bench {

// Ops per second of `ops` PushAsync calls of a no-op op with no vars, then
// WaitForAll.
[[nodiscard]] double IndependentOpsPerSecond(engine::Engine& engine, int64_t ops);

// The same with every op writing one var.
[[nodiscard]] double ChainOpsPerSecond(engine::Engine& engine, int64_t ops);

// Ops per second of the DAG through PushAsync; vars are made and deleted
// outside the timing. `*data` ends up with the final data.
[[nodiscard]] double DagOpsPerSecond(engine::Engine& engine,
                                     const engine::testing::Workload& workload,
                                     std::vector<uint64_t>* data);

// Push-to-start times in microseconds, one op in flight at a time, with a
// sleep of `gap_us` before each push (0: none).
[[nodiscard]] std::vector<double> PushToStartMicros(engine::Engine& engine, int samples,
                                                    int gap_us);

// The CPU this process uses while `engine` sits idle, in % of one core:
// push `ops` no-op ops and wait for them, let the engine settle for 0.2 s,
// then measure user + system time (getrusage, every thread) over 1 s of
// sleep. Meaningful when the engine is the only thing in the process.
[[nodiscard]] double IdleCpuPercent(engine::Engine& engine, int64_t ops);

}  // namespace ember::bench
