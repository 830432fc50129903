#pragma once

// The warm CPU table of ember-bench-engine: one row per case, one column
// per engine and peer, and the targets of the default engine on a 2-core
// machine.
//
// Thread safety: plain functions.

#include <string>
#include <vector>

#include "tools/bench/common/results.h"
#include "tools/bench/common/table.h"
#include "tools/bench/engine/bench_options.h"

namespace ember::bench {

// A warm CPU case: its key in Results and JSON, and its unit.
struct CpuCase {
  const char* key;
  const char* unit;
  bool higher_is_better;
};

inline constexpr CpuCase kIndependent = {"independent", "ops/s", true};
inline constexpr CpuCase kChain = {"chain", "ops/s", true};
inline constexpr CpuCase kDag = {"random_dag", "ops/s", true};
inline constexpr CpuCase kLatencyP50 = {"latency_p50", "us", false};
inline constexpr CpuCase kLatencyP99 = {"latency_p99", "us", false};
inline constexpr CpuCase kIdleLatencyP50 = {"idle_latency_p50", "us", false};
inline constexpr CpuCase kIdleLatencyP99 = {"idle_latency_p99", "us", false};
inline constexpr CpuCase kIdleCpu = {"idle_cpu", "%", false};

// The table of `results` (the ratios to the peers are added to it), with
// `notes` under it.
[[nodiscard]] Table MakeCpuTable(const EngineBenchOptions& options, Results* results,
                                 std::vector<std::string> notes);

}  // namespace ember::bench
