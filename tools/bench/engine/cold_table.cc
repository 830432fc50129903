#include "tools/bench/engine/cold_table.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tools/bench/common/core_round_trip.h"
#include "tools/bench/common/table_printer.h"
#include "tools/bench/engine/cold_cases.h"
#include "tools/bench/engine/dag_push.h"

namespace ember::bench {
namespace {

// The goals of the default engine, cold, through either push path.
constexpr double kVsTbbGoal = 2.5;
constexpr double kVsStarPUGoal = 10;
constexpr double kSpreadGoal = 1.3;

std::string EngineColumn(const std::string& engine, PushPath path) {
  return absl::StrCat(engine, " ", PushPathName(path));
}

// 100000 -> "100k", 1000000 -> "1M": short enough for a target's name.
std::string Short(int n) {
  if (n >= 1'000'000 && n % 1'000'000 == 0) return absl::StrCat(n / 1'000'000, "M");
  if (n >= 1'000 && n % 1'000 == 0) return absl::StrCat(n / 1'000, "k");
  return absl::StrCat(n);
}

void AddShapeRows(const EngineBenchOptions& options, const ColdShape& shape, Results* results,
                  Table* table) {
  const std::string dag = ColdKey(shape, "dag");
  for (const std::string& engine : options.cold_engines) {
    for (PushPath path : {PushPath::kSync, PushPath::kAsync}) {
      const std::string column = EngineColumn(engine, path);
      results->AddRatios(ColdKey(shape, "vs_tbb"), column, dag, column, dag, kTbb);
      results->AddRatios(ColdKey(shape, "vs_starpu"), column, dag, column, dag, kStarPU);
    }
  }
  auto add = [&](const char* what, const char* unit, std::string label, Stat stat = Stat::kMedian,
                 const char* source = nullptr) {
    table->AddRow(*results, ColdKey(shape, what), unit, std::move(label), stat,
                  source != nullptr ? ColdKey(shape, source) : "");
  };
  add("dag", "ops/s",
      absl::StrFormat("cold DAG, %s ops/%s vars", WithCommas(shape.ops), WithCommas(shape.vars)));
  add("dag_spread", "x", "  spread (max/min)", Stat::kSpread, "dag");
  add("dag_min", "ops/s", "  min", Stat::kMin, "dag");
  add("dag_max", "ops/s", "  max", Stat::kMax, "dag");
  add("vs_tbb", "x", "  engine / TBB flow graph, same round");
  add("vs_starpu", "x", "  engine / StarPU, same round");
  add("voluntary", "count", "  voluntary context switches");
  add("involuntary", "count", "  involuntary context switches");
  add("sys_ms", "ms", "  system CPU time");
  add("user_ms", "ms", "  user CPU time");
  add("create_us", "us", "  engine creation (not in the DAG)");
  add("round_trip", "ns", "  inter-core round trip around the run");
  add("round_trip_min", "ns", "    min", Stat::kMin, "round_trip");
  add("round_trip_max", "ns", "    max", Stat::kMax, "round_trip");

  if (!std::count(options.cold_engines.begin(), options.cold_engines.end(), kTargetEngine)) {
    return;
  }
  const std::string name = absl::StrCat("cold ", Short(shape.ops), "/", Short(shape.vars));
  for (PushPath path : {PushPath::kSync, PushPath::kAsync}) {
    const std::string column = EngineColumn(kTargetEngine, path);
    const std::string prefix = absl::StrCat(name, " ", PushPathName(path));
    table->targets.push_back({absl::StrCat(prefix, " / TBB flow graph"), ColdKey(shape, "vs_tbb"),
                              kVsTbbGoal, true, column});
    table->targets.push_back({absl::StrCat(prefix, " / StarPU"), ColdKey(shape, "vs_starpu"),
                              kVsStarPUGoal, true, column});
    table->targets.push_back({absl::StrCat(prefix, " spread (max/min)"),
                              ColdKey(shape, "dag_spread"), kSpreadGoal, false, column});
  }
}

}  // namespace

Table MakeColdTable(const EngineBenchOptions& options, Results* results,
                    std::vector<std::string> notes) {
  Table table;
  table.title = "Engine (CPU), cold: every run a fresh process";
  table.target_column = kTargetEngine;
  table.targets_title = absl::StrCat("Targets for ", kTargetEngine, ", cold (2-core machine)");
  for (const std::string& engine : options.cold_engines) {
    table.columns.push_back(EngineColumn(engine, PushPath::kSync));
    table.columns.push_back(EngineColumn(engine, PushPath::kAsync));
  }
  table.columns.push_back(kTbb);
  table.columns.push_back(kStarPU);
  for (const ColdShape& shape : options.cold_shapes) AddShapeRows(options, shape, results, &table);
  table.DropEmptyColumns();
  table.notes = {
      "every run: posix_spawn of this binary, which makes the workload (untimed, seed " +
          absl::StrCat(options.dag.seed) +
          "), creates the engine (its own row) or starts StarPU (untimed), then times from the "
          "first push to the end of WaitForAll and checks the data against RunSerial",
      "PushSync: PushSync(data[write] = ApplyOp(op, data), reads, {write}); PushAsync: the same "
      "in PushAsync with on_start/on_complete (as the warm DAG case)",
      "context switches and CPU times: getrusage of the child over the timed part, all its "
      "threads; medians",
      absl::StrFormat("median of %d rounds per shape, columns round-robin; ratios per round, "
                      "then the median; PerDevice cpu_workers=%d, ThreadedEngine pool_workers=%d",
                      options.cold_repeat, options.cpu_workers, options.pool_workers),
  };
  table.notes.push_back(absl::StrFormat(
      "inter-core round trip: one cache line from the child's main thread to another thread and "
      "back, the mean of %s trips before the engine or peer starts and after it stops; on a VM "
      "it follows where the host runs the vCPUs at that moment",
      WithCommas(kRoundTrips)));
  for (std::string& note : notes) table.notes.push_back(std::move(note));
  return table;
}

}  // namespace ember::bench
