#pragma once

// The figures of ember-bench-engine and their report. Results holds every
// run's figure by case and column (an engine or a peer); Report summarizes
// the runs (median or best) into a table with one row per case and one
// column per engine and peer, checks the targets, and writes the same
// figures as JSON.
//
// Thread safety: none; the bench's main thread uses these.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace ember::bench {

// A case of the bench: its key in JSON and in Results, and its unit.
struct CaseSpec {
  const char* key;
  const char* unit;
  bool higher_is_better;
};

inline constexpr CaseSpec kIndependent = {"independent", "ops/s", true};
inline constexpr CaseSpec kChain = {"chain", "ops/s", true};
inline constexpr CaseSpec kDag = {"random_dag", "ops/s", true};
inline constexpr CaseSpec kDagVsTbb = {"random_dag_vs_tbb", "x", true};
inline constexpr CaseSpec kDagVsStarPU = {"random_dag_vs_starpu", "x", true};
inline constexpr CaseSpec kLatencyP50 = {"latency_p50", "us", false};
inline constexpr CaseSpec kLatencyP99 = {"latency_p99", "us", false};
inline constexpr CaseSpec kIdleLatencyP50 = {"idle_latency_p50", "us", false};
inline constexpr CaseSpec kIdleLatencyP99 = {"idle_latency_p99", "us", false};

// The peers' columns.
inline constexpr char kTbb[] = "TBB flow graph";
inline constexpr char kStarPU[] = "StarPU";

// The value at `fraction` (0.5: the median) of `values`, by nearest rank;
// NaN for none.
double Percentile(std::vector<double> values, double fraction);

class Results {
 public:
  // Records one run's figure; runs of one case and column keep their order.
  void Add(const CaseSpec& c, const std::string& column, double value);

  // The median of a case's runs (the best one with `best`), or nothing if
  // it was not run.
  [[nodiscard]] std::optional<double> Get(const CaseSpec& c, const std::string& column,
                                          bool best) const;

  // A case's figures in run order; empty if it was not run.
  [[nodiscard]] const std::vector<double>& Samples(const CaseSpec& c,
                                                   const std::string& column) const;

  // One "case<TAB>column<TAB>value" line per figure, so that a child
  // process can hand its figures to the parent; Merge reads them back.
  [[nodiscard]] std::string Serialize() const;
  void Merge(absl::string_view text);  // Debian's Abseil has its own string_view

 private:
  std::map<std::pair<std::string, std::string>, std::vector<double>> samples_;
};

// A table that another part of the bench fills in itself (the GPU cases):
// printed after the main one in the same layout, with its own targets, and
// written to JSON under "tables". A ratio row puts each ratio in the column
// it is about.
struct ExtraTable {
  struct Row {
    std::string key;  // unique in the table: the row's "case" in JSON
    std::string unit;
    std::string label;
    std::map<std::string, double> values;  // by column; absent: not run
  };
  struct Target {
    std::string name;
    std::string key;  // the row it checks, in the column target_engine
    double goal = 0;
    bool at_least = true;  // goal is a floor; else a ceiling
  };
  std::string title;
  std::string target_engine;
  std::vector<std::string> columns;
  std::vector<Row> rows;
  std::vector<Target> targets;
  std::vector<std::string> notes;
};

// What the report needs besides the figures.
struct ReportSpec {
  std::vector<std::string> engines;  // the engine columns, in order
  std::string target_engine;         // the engine the targets apply to
  bool best = false;                 // summarize runs by the best, not the median
  int64_t ops = 0;                   // for the row labels
  int dag_ops = 0;
  int dag_vars = 0;
  int idle_gap_us = 0;
  std::vector<std::string> notes;  // printed under the table
  std::string options_json;        // the bench's options, as a JSON object
  bool dag_ok = true;              // every DAG result matched RunSerial
  std::vector<ExtraTable> tables;  // printed after the main table
};

// Prints the table and its targets (neither when no case of it ran), then
// each extra table and its targets, on stdout and, when `json_path` is not
// empty, writes the same figures there. Throws Error if the file cannot be
// written.
void Report(const ReportSpec& spec, Results results, const std::string& json_path);

// `text` as a JSON string. REQUIRES: plain ASCII.
std::string JsonString(std::string_view text);

}  // namespace ember::bench
