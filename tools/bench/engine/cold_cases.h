#pragma once

// The cold cases of ember-bench-engine (--cases=cold): the random DAG run
// cold, every run in a fresh process (cold_run.h), so that nothing a
// training job would not have at its first step is warm: no heap, no
// threads, no caches. For each shape of --cold_shapes, --cold_repeat
// rounds; a round runs, each in its own process, every engine of
// --cold_engines through PushSync and through PushAsync (a column each),
// then the oneTBB flow graph and StarPU on the same DAG. The ratios to the
// peers pair each engine run with the peer runs of its round.
//
// Thread safety: call from the bench's main thread.

#include <string>

#include "tools/bench/common/results.h"
#include "tools/bench/common/table.h"
#include "tools/bench/engine/bench_options.h"

namespace ember::bench {

struct ColdCasesResult {
  Table table;
  Results results;     // every run's figures, the ratios included
  bool dag_ok = true;  // every run's data matched RunSerial
};

// Runs the cases; progress on stderr, a line per child. Throws Error when a
// child fails (not for a wrong result: that is dag_ok).
[[nodiscard]] ColdCasesResult RunColdCases(const EngineBenchOptions& options);

// The key of a cold figure of `shape` in Results and JSON, e.g.
// "cold_100000x100_dag".
[[nodiscard]] std::string ColdKey(const ColdShape& shape, const char* what);

}  // namespace ember::bench
