#include "tools/bench/engine/cold_cases.h"

#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/error.h"
#include "tools/bench/common/machine_notes.h"
#include "tools/bench/engine/cold_run.h"
#include "tools/bench/engine/cold_table.h"
#include "tools/bench/engine/spawn_self.h"
#include "tools/bench/engine/starpu_peer.h"
#include "tools/bench/engine/tbb_peer.h"

namespace ember::bench {
namespace {

// The runs of one round, in the order they go.
std::vector<ColdRunSpec> RoundOf(const EngineBenchOptions& o, const ColdShape& shape, bool tbb,
                                 bool starpu) {
  ColdRunSpec base;
  base.ops = shape.ops;
  base.vars = shape.vars;
  base.seed = o.dag.seed;
  base.pool_workers = o.pool_workers;
  base.cpu_workers = o.cpu_workers;
  base.peer_threads = o.peer_threads;
  std::vector<ColdRunSpec> round;
  for (const std::string& engine : o.cold_engines) {
    for (ColdRunner runner : {ColdRunner::kEngineSync, ColdRunner::kEngineAsync}) {
      ColdRunSpec spec = base;
      spec.runner = runner;
      spec.engine = engine;
      round.push_back(std::move(spec));
    }
  }
  for (const auto& [runner, built] :
       {std::pair{ColdRunner::kTbb, tbb}, std::pair{ColdRunner::kStarPU, starpu}}) {
    if (!built) continue;
    ColdRunSpec spec = base;
    spec.runner = runner;
    round.push_back(std::move(spec));
  }
  return round;
}

// One child: spawned, waited for, its figures recorded and reported.
void RunChild(const ColdRunSpec& spec, const ColdShape& shape, int round, int rounds,
              ColdCasesResult* out, std::map<std::string, std::string>* descriptions) {
  std::vector<std::string> args = spec.ToArgs();
  args.insert(args.begin(), kColdRunFlag);
  const OtherProcessesMeter others;  // over this child alone: a busy spell shows per run
  const SpawnResult child = SpawnSelf(args);
  const double others_share = others.Share();
  if (child.exit_status > 1) {
    throw Error(absl::StrFormat("[ember-bench-engine] cold run of %s failed (exit status %d)",
                                spec.column(), child.exit_status));
  }
  out->dag_ok = out->dag_ok && child.exit_status == 0;
  const ColdRunResult r = ColdRunResult::Parse(child.output);
  const std::string column = spec.column();
  Results& results = out->results;
  results.Add(ColdKey(shape, "dag"), column, r.ops_per_s);
  results.Add(ColdKey(shape, "voluntary"), column, r.usage.voluntary_switches);
  results.Add(ColdKey(shape, "involuntary"), column, r.usage.involuntary_switches);
  results.Add(ColdKey(shape, "sys_ms"), column, 1e3 * r.usage.sys_s);
  results.Add(ColdKey(shape, "user_ms"), column, 1e3 * r.usage.user_s);
  if (r.create_us >= 0) results.Add(ColdKey(shape, "create_us"), column, r.create_us);
  if (r.round_trip_ns >= 0) results.Add(ColdKey(shape, "round_trip"), column, r.round_trip_ns);
  results.Add(ColdKey(shape, "others_pct"), column, 100 * others_share);
  if (!r.description.empty()) (*descriptions)[column] = r.description;
  absl::FPrintF(stderr,
                "[ember-bench-engine] cold %dx%d round %d/%d %-34s %10.0f ops/s  vcsw %6.0f  "
                "ivcsw %5.0f  sys %7.1f ms  user %7.1f ms  round trip %5.0f ns  others %3.0f%%%s\n",
                shape.ops, shape.vars, round + 1, rounds, column, r.ops_per_s,
                r.usage.voluntary_switches, r.usage.involuntary_switches, 1e3 * r.usage.sys_s,
                1e3 * r.usage.user_s, r.round_trip_ns, 100 * others_share,
                r.create_us >= 0 ? absl::StrFormat("  created in %.0f us", r.create_us) : "");
}

// How busy the machine was around each child: the median and the worst,
// since one busy spell can make the spread of a column.
std::string OthersPerRunNote(const Results& results) {
  std::vector<double> shares;
  for (const auto& [key, values] : results.all()) {
    if (key.first.ends_with("_others_pct"))
      shares.insert(shares.end(), values.begin(), values.end());
  }
  return absl::StrFormat(
      "other processes' CPU share around each run: median %.1f%%, max %.1f%% (per run on stderr)",
      Summarize(shares, Stat::kMedian), Summarize(shares, Stat::kMax));
}

}  // namespace

std::string ColdKey(const ColdShape& shape, const char* what) {
  return absl::StrCat("cold_", shape.ops, "x", shape.vars, "_", what);
}

ColdCasesResult RunColdCases(const EngineBenchOptions& options) {
  const MachineInfo machine = MachineInfo::Read();
  const bool tbb = options.run_tbb && TbbPeerBuilt();
  const bool starpu = options.run_starpu && StarPUPeerBuilt();
  absl::FPrintF(stderr, "[ember-bench-engine] cold cases: %s\n", machine.Note());
  ColdCasesResult out;
  std::map<std::string, std::string> descriptions;  // of the peers, by column
  const OtherProcessesMeter others;
  for (const ColdShape& shape : options.cold_shapes) {
    const std::vector<ColdRunSpec> round = RoundOf(options, shape, tbb, starpu);
    for (int r = 0; r < options.cold_repeat; ++r) {
      for (const ColdRunSpec& spec : round) {
        RunChild(spec, shape, r, options.cold_repeat, &out, &descriptions);
      }
    }
  }
  std::vector<std::string> notes;
  for (const auto& [column, description] : descriptions) {
    notes.push_back(absl::StrCat(column, ": ", description));
  }
  if (options.run_tbb && !tbb) {
    notes.push_back("TBB flow graph peer: not built (oneTBB not found or peers disabled)");
  }
  if (options.run_starpu && !starpu) {
    notes.push_back("StarPU peer: not built (starpu-1.3 not found or peers disabled)");
  }
  notes.push_back(others.Note("ember-bench-engine"));
  notes.push_back(OthersPerRunNote(out.results));
  notes.push_back(machine.Note());
  if (!out.dag_ok) notes.push_back("ERROR: a cold run's result differed from RunSerial");
  out.table = MakeColdTable(options, &out.results, std::move(notes));
  return out;
}

}  // namespace ember::bench
