#pragma once

// The warm CPU cases of ember-bench-engine (--cases=cpu): every engine of
// --engines and the peers, --repeat rounds. A round goes once round the
// engines and the peers, each run in a child process of its own (--isolate,
// forked_run.h), so that a slow spell of a shared machine hits every column
// alike and no column inherits another's heap or threads. An engine run
// makes a fresh engine, warms it up (10,000 independent ops) and runs the
// independent, chain, random DAG and latency cases on it (engine_cases.h);
// the idle CPU case gets a fresh engine and process of its own. The peers
// run the same random DAG.
//
// Thread safety: call from the bench's main thread.

#include <string>

#include "tools/bench/common/results.h"
#include "tools/bench/common/table.h"
#include "tools/bench/engine/bench_options.h"

namespace ember::bench {

struct CpuCasesResult {
  Table table;
  Results results;     // every run's figures, the ratios included
  bool dag_ok = true;  // every DAG result matched RunSerial
};

// Runs the cases; progress on stderr, a line per figure. Throws Error when
// a run fails (not for a wrong DAG result: that is dag_ok).
[[nodiscard]] CpuCasesResult RunCpuCases(const EngineBenchOptions& options);

}  // namespace ember::bench
