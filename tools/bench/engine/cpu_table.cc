#include "tools/bench/engine/cpu_table.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "tools/bench/common/table_printer.h"

namespace ember::bench {
namespace {

constexpr CpuCase kDagVsTbb = {"random_dag_vs_tbb", "x", true};
constexpr CpuCase kDagVsStarPU = {"random_dag_vs_starpu", "x", true};

// Targets of the default engine on a 2-core machine.
void AddTargets(Table* table) {
  table->target_column = kTargetEngine;
  table->targets_title = absl::StrCat("Targets for ", kTargetEngine, " (2-core machine)");
  table->targets = {
      {"independent no-op ops", kIndependent.key, 1.5e6, true},
      {"random DAG, engine / TBB flow graph", kDagVsTbb.key, 2.5, true},
      {"random DAG, engine / StarPU", kDagVsStarPU.key, 10, true},
      {"push-to-start p50, back to back", kLatencyP50.key, 10, false},
      {"idle engine CPU use, % of one core", kIdleCpu.key, 1, false},
  };
}

}  // namespace

Table MakeCpuTable(const EngineBenchOptions& options, Results* results,
                   std::vector<std::string> notes) {
  // engine / peer per round: run i of the engine against run i of the peer,
  // which ran moments later.
  for (const std::string& engine : options.engines) {
    results->AddRatios(kDagVsTbb.key, engine, kDag.key, engine, kDag.key, kTbb);
    results->AddRatios(kDagVsStarPU.key, engine, kDag.key, engine, kDag.key, kStarPU);
  }
  Table table;
  table.columns = options.engines;
  table.columns.push_back(kTbb);
  table.columns.push_back(kStarPU);
  auto add = [&](const CpuCase& c, std::string label) {
    const Stat stat = !options.best        ? Stat::kMedian
                      : c.higher_is_better ? Stat::kBestHigher
                                           : Stat::kBestLower;
    table.AddRow(*results, c.key, c.unit, std::move(label), stat);
  };
  const std::string n = WithCommas(static_cast<double>(options.ops));
  add(kIndependent, absl::StrCat("independent no-op ops, N=", n));
  add(kChain, absl::StrCat("one-var chain, N=", n));
  add(kDag, absl::StrCat("random DAG, ", WithCommas(options.dag.num_ops), " ops/",
                         options.dag.num_vars, " vars"));
  add(kDagVsTbb, "  engine / TBB flow graph, same run");
  add(kDagVsStarPU, "  engine / StarPU, same run");
  add(kLatencyP50, "push-to-start p50, back to back");
  add(kLatencyP99, "push-to-start p99, back to back");
  const std::string idle = absl::StrCat("after ", options.idle_gap_us, " us idle");
  add(kIdleLatencyP50, absl::StrCat("push-to-start p50, ", idle));
  add(kIdleLatencyP99, absl::StrCat("push-to-start p99, ", idle));
  add(kIdleCpu, absl::StrCat("idle engine CPU, 1 s after ",
                             WithCommas(static_cast<double>(options.idle_cpu_ops)), " ops"));
  table.DropEmptyColumns();
  table.notes = std::move(notes);
  AddTargets(&table);
  return table;
}

}  // namespace ember::bench
