#pragma once

// The cold table of ember-bench-engine (cold_cases.h): per shape, the DAG's
// median ops/s and how far apart the runs were (spread, min, max), the
// ratios to the peers, and what the sleep/wake churn of each column cost
// (context switches and CPU time of the timed part, medians); then the
// targets of the default engine, cold, through both push paths.
//
// Thread safety: plain functions.

#include <string>
#include <vector>

#include "tools/bench/common/results.h"
#include "tools/bench/common/table.h"
#include "tools/bench/engine/bench_options.h"

namespace ember::bench {

// The table of `results` (the ratios to the peers are added to it), with
// `notes` under it.
[[nodiscard]] Table MakeColdTable(const EngineBenchOptions& options, Results* results,
                                  std::vector<std::string> notes);

}  // namespace ember::bench
