#pragma once

// The random DAG on an engine: the push loop that the warm and the cold DAG
// cases time, through either push path. Each op computes ApplyOp into the
// shared data vector, so the final data shows any ordering mistake
// (checked against RunSerial by the callers).
//
// Thread safety: one pushing thread per engine.

#include <cstdint>
#include <vector>

#include "engine/engine.h"
#include "engine/testing/random_workload.h"

namespace ember::bench {

enum class PushPath {
  kAsync,  // PushAsync: on_start, ApplyOp, on_complete
  kSync,   // PushSync: ApplyOp; the engine wraps it
};

// "PushAsync" or "PushSync".
[[nodiscard]] const char* PushPathName(PushPath path);

// `count` new vars of `engine`; DeleteVars deletes them (and waits).
[[nodiscard]] std::vector<engine::VarHandle> NewVars(engine::Engine& engine, int count);
void DeleteVars(engine::Engine& engine, const std::vector<engine::VarHandle>& vars);

// Pushes every op of `workload` through `path` and waits for all of them
// (WaitForAll): what a DAG figure times. The reads go as generated, repeats
// and all, since normalizing them is part of the engine's cost. vars[i] is
// var i of the workload; `*data` holds the initial data and ends up with
// the final data. REQUIRES: `*data` and `workload` outlive the wait.
void PushDag(engine::Engine& engine, const engine::testing::Workload& workload,
             const std::vector<engine::VarHandle>& vars, PushPath path,
             std::vector<uint64_t>* data);

}  // namespace ember::bench
