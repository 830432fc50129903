#pragma once

// One cold run of the random DAG (--cases=cold), in a process of its own:
// the bench spawns itself (spawn_self.h) with kColdRunFlag and a
// ColdRunSpec, and the child, which inherits nothing warm, does this:
//
//   1. makes the workload (MakeRandomWorkload: untimed, the parent's seed);
//   2. an engine run: creates a fresh engine (its creation time is
//      reported, apart from the DAG figure) and the vars; a peer run:
//      starts StarPU (untimed) or nothing (TBB starts its threads lazily,
//      inside its timing, as in the warm case);
//   3. times from the first push (first node built, first task inserted) to
//      the end of WaitForAll (wait_for_all, starpu_task_wait_for_all), and
//      takes getrusage before and after: context switches and CPU time of
//      every thread over the timed part; probes the inter-core round trip
//      before the engine or peer starts and after it has stopped
//      (core_round_trip.h);
//   4. checks its final data against RunSerial, made only now so that it
//      warms nothing before the timing;
//   5. prints a ColdRunResult on stdout and exits 0, or 1 when the data
//      differ (2 for an error, whose message goes to stderr).
//
// Thread safety: the child's main thread; the parent's main thread.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tools/bench/common/process_usage.h"

namespace ember::bench {

// argv[1] of a cold child. Not an Abseil flag, so that it shows in no help
// text and the child parses nothing else.
inline constexpr char kColdRunFlag[] = "--ember_cold_run";

// What runs the DAG.
enum class ColdRunner { kEngineSync, kEngineAsync, kTbb, kStarPU };

struct ColdRunSpec {
  ColdRunner runner = ColdRunner::kEngineAsync;
  std::string engine;  // an ENGINE_TYPE name, for the engine runners
  int ops = 0;
  int vars = 0;
  uint64_t seed = 1;
  int pool_workers = 0;  // ThreadedEngine
  int cpu_workers = 0;   // ThreadedEnginePerDevice
  int peer_threads = 0;

  // The report's column: "<engine> PushSync", "<engine> PushAsync", or the
  // peer's column.
  [[nodiscard]] std::string column() const;

  // The child's arguments after kColdRunFlag, and back. FromArgs throws
  // InvalidArgument for an argument it does not know.
  [[nodiscard]] std::vector<std::string> ToArgs() const;
  [[nodiscard]] static ColdRunSpec FromArgs(const std::vector<std::string>& args);
};

struct ColdRunResult {
  double ops_per_s = 0;
  double create_us = -1;      // the engine's creation; -1 for a peer
  ProcessUsage usage;         // over the timed part
  double round_trip_ns = -1;  // the inter-core round trip, mean of the probes around it
  std::string description;    // the peer's, or empty

  // One "key<TAB>value" line per field; Parse reads them back and throws
  // Error when ops_per_s is missing.
  [[nodiscard]] std::string Serialize() const;
  [[nodiscard]] static ColdRunResult Parse(std::string_view text);
};

// True when this process is a cold child (argv[1] is kColdRunFlag).
[[nodiscard]] bool IsColdRun(int argc, char** argv);

// The child's main: runs the spec in argv[2..] and returns the exit status.
int ColdRunMain(int argc, char** argv);

}  // namespace ember::bench
