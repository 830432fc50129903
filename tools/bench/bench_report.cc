#include "tools/bench/bench_report.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <span>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "engine/error.h"

namespace ember::bench {

double Percentile(std::vector<double> values, double fraction) {
  if (values.empty()) return NAN;
  const auto rank = static_cast<size_t>(fraction * static_cast<double>(values.size() - 1) + 0.5);
  std::nth_element(values.begin(), values.begin() + rank, values.end());
  return values[rank];
}

void Results::Add(const CaseSpec& c, const std::string& column, double value) {
  samples_[{c.key, column}].push_back(value);
}

std::optional<double> Results::Get(const CaseSpec& c, const std::string& column, bool best) const {
  const std::vector<double>& values = Samples(c, column);
  if (values.empty()) return std::nullopt;
  if (!best) return Percentile(values, 0.5);
  return c.higher_is_better ? *std::max_element(values.begin(), values.end())
                            : *std::min_element(values.begin(), values.end());
}

const std::vector<double>& Results::Samples(const CaseSpec& c, const std::string& column) const {
  static const std::vector<double> kNone;
  auto it = samples_.find({c.key, column});
  return it == samples_.end() ? kNone : it->second;
}

std::string Results::Serialize() const {
  std::string text;
  for (const auto& [key, values] : samples_) {
    for (double value : values) {
      absl::StrAppend(&text, key.first, "\t", key.second, "\t", absl::StrFormat("%.17g", value),
                      "\n");
    }
  }
  return text;
}

void Results::Merge(absl::string_view text) {
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    const std::vector<absl::string_view> fields = absl::StrSplit(line, '\t');
    double value = 0;
    if (fields.size() == 3 && absl::SimpleAtod(fields[2], &value)) {
      samples_[{std::string(fields[0]), std::string(fields[1])}].push_back(value);
    }
  }
}

namespace {

// ---------------------------------------------------------------------------
// The table: one row per case, one column per engine and peer.

struct TableRow {
  const CaseSpec* spec;
  std::string label;
  std::map<std::string, double> values;  // by column; absent: not run
};

struct Table {
  std::vector<std::string> columns;
  std::vector<TableRow> rows;
  std::vector<std::string> notes;

  [[nodiscard]] std::optional<double> Get(const CaseSpec& c, const std::string& column) const {
    for (const TableRow& row : rows) {
      if (row.spec != &c) continue;
      auto it = row.values.find(column);
      if (it != row.values.end()) return it->second;
    }
    return std::nullopt;
  }
};

std::string WithCommas(double value) {
  std::string digits = absl::StrFormat("%.0f", value);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0 && std::isdigit(digits[i - 1]); i -= 3) {
    digits.insert(i, ",");
  }
  return digits;
}

std::string FormatValue(const CaseSpec& c, double value) {
  if (std::string_view(c.unit).ends_with("/s")) return WithCommas(value);
  if (std::string_view(c.unit) == "x") return absl::StrFormat("%.2fx", value);
  return absl::StrFormat("%.2f", value);
}

void AddRow(const Results& results, bool best, const CaseSpec& c, std::string label, Table* table) {
  TableRow row{&c, std::move(label), {}};
  for (const std::string& column : table->columns) {
    if (auto value = results.Get(c, column, best)) row.values[column] = *value;
  }
  if (!row.values.empty()) table->rows.push_back(std::move(row));
}

// engine / peer on the random DAG, per run: run i of the engine against run
// i of the peer, which ran moments later, so that a slow spell of the
// machine cancels out of the ratio instead of skewing it.
void AddPairedRatios(const ReportSpec& spec, const CaseSpec& ratio, const char* peer,
                     Results* results) {
  const std::vector<double>& peer_rates = results->Samples(kDag, peer);
  for (const std::string& engine : spec.engines) {
    const std::vector<double>& rates = results->Samples(kDag, engine);
    for (size_t run = 0; run < std::min(rates.size(), peer_rates.size()); ++run) {
      results->Add(ratio, engine, rates[run] / peer_rates[run]);
    }
  }
}

Table MakeTable(const ReportSpec& spec, Results results) {
  AddPairedRatios(spec, kDagVsTbb, kTbb, &results);
  AddPairedRatios(spec, kDagVsStarPU, kStarPU, &results);
  Table table;
  table.columns = spec.engines;
  table.columns.push_back(kTbb);
  table.columns.push_back(kStarPU);
  const bool best = spec.best;
  const std::string n = WithCommas(static_cast<double>(spec.ops));
  AddRow(results, best, kIndependent, absl::StrCat("independent no-op ops, N=", n), &table);
  AddRow(results, best, kChain, absl::StrCat("one-var chain, N=", n), &table);
  AddRow(results, best, kDag,
         absl::StrCat("random DAG, ", WithCommas(spec.dag_ops), " ops/", spec.dag_vars, " vars"),
         &table);
  AddRow(results, best, kDagVsTbb, "  engine / TBB flow graph, same run", &table);
  AddRow(results, best, kDagVsStarPU, "  engine / StarPU, same run", &table);
  AddRow(results, best, kLatencyP50, "push-to-start p50, back to back", &table);
  AddRow(results, best, kLatencyP99, "push-to-start p99, back to back", &table);
  const std::string idle = absl::StrCat("after ", spec.idle_gap_us, " us idle");
  AddRow(results, best, kIdleLatencyP50, absl::StrCat("push-to-start p50, ", idle), &table);
  AddRow(results, best, kIdleLatencyP99, absl::StrCat("push-to-start p99, ", idle), &table);
  table.notes = spec.notes;
  std::erase_if(table.columns, [&](const std::string& column) {
    return std::none_of(table.rows.begin(), table.rows.end(),
                        [&](const TableRow& row) { return row.values.contains(column); });
  });
  return table;
}

// Short column headers keep the table within 100 characters.
std::string ShortName(const std::string& column) {
  for (const auto& [prefix, short_name] :
       {std::pair{"ThreadedEnginePerDevice", "PerDevice"}, std::pair{"ThreadedEngine", "Threaded"},
        std::pair{"NaiveEngine", "Naive"}, std::pair{"TBB flow graph", "TBB flow"}}) {
    if (column.rfind(prefix, 0) == 0) return short_name + column.substr(strlen(prefix));
  }
  return column;
}

// A column is 12 characters wide, or as wide as its header; the unit
// column as wide as its longest unit.
void PrintTable(const Table& table) {
  int unit_width = 6;
  for (const TableRow& row : table.rows) {
    unit_width = std::max<int>(unit_width, static_cast<int>(strlen(row.spec->unit)));
  }
  if (!table.rows.empty()) {
    std::string header = absl::StrFormat("%-40s %-*s", "case", unit_width, "unit");
    for (const std::string& column : table.columns) {
      absl::StrAppend(&header, absl::StrFormat(" %12s", ShortName(column)));
    }
    absl::PrintF("%s\n%s\n", header, std::string(header.size(), '-'));
  }
  for (const TableRow& row : table.rows) {
    std::string line = absl::StrFormat("%-40s %-*s", row.label, unit_width, row.spec->unit);
    for (const std::string& column : table.columns) {
      auto it = row.values.find(column);
      const std::string cell = it == row.values.end() ? "-" : FormatValue(*row.spec, it->second);
      const int width = std::max<int>(12, static_cast<int>(ShortName(column).size()));
      absl::StrAppend(&line, absl::StrFormat(" %*s", width, cell));
    }
    absl::PrintF("%s\n", line);
  }
  for (const std::string& note : table.notes) absl::PrintF("%s\n", note);
}

// ---------------------------------------------------------------------------
// Targets: what the default engine must reach on a 2-core machine.

struct Target {
  const char* name;
  const CaseSpec* spec;
  double goal;
  bool at_least;  // goal is a floor; else a ceiling
};

constexpr Target kTargets[] = {
    {"independent no-op ops", &kIndependent, 1e6, true},
    {"random DAG, engine / TBB flow graph", &kDagVsTbb, 2, true},
    {"random DAG, engine / StarPU", &kDagVsStarPU, 10, true},
    {"push-to-start p50, back to back", &kLatencyP50, 10, false},
};

struct TargetResult {
  const Target* target;
  std::optional<double> measured;
  [[nodiscard]] bool pass() const {
    return measured && (target->at_least ? *measured >= target->goal : *measured <= target->goal);
  }
};

std::vector<TargetResult> CheckTargets(const Table& table, const std::string& engine,
                                       std::span<const Target> targets) {
  std::vector<TargetResult> checks;
  if (table.rows.empty()) return checks;  // none of the table's cases ran
  for (const Target& target : targets) checks.push_back({&target, table.Get(*target.spec, engine)});
  return checks;
}

std::string WithUnit(const CaseSpec& c, double value) {
  const std::string text = FormatValue(c, value);
  return std::string_view(c.unit) == "x" ? text : absl::StrCat(text, " ", c.unit);
}

void PrintTargets(const std::vector<TargetResult>& checks, const std::string& title) {
  if (checks.empty()) return;
  absl::PrintF("\n%s:\n", title);
  for (const TargetResult& check : checks) {
    const Target& target = *check.target;
    const std::string measured = check.measured ? WithUnit(*target.spec, *check.measured) : "-";
    absl::PrintF("  %-40s %18s   %s %-18s %s\n", target.name, measured,
                 target.at_least ? ">=" : "<=", WithUnit(*target.spec, target.goal),
                 !check.measured ? "not run"
                 : check.pass()  ? "PASS"
                                 : "FAIL");
  }
}

// An ExtraTable in the report's own types. Rows and targets point into
// specs and targets, so a BuiltTable stays where it is made (a deque).
struct BuiltTable {
  explicit BuiltTable(const ExtraTable& extra) : source(&extra) {
    for (const ExtraTable::Row& row : extra.rows) {
      specs.push_back({row.key.c_str(), row.unit.c_str(), /*higher_is_better=*/true});
    }
    table.columns = extra.columns;
    for (size_t i = 0; i < extra.rows.size(); ++i) {
      table.rows.push_back({&specs[i], extra.rows[i].label, extra.rows[i].values});
    }
    table.notes = extra.notes;
    for (const ExtraTable::Target& target : extra.targets) {
      for (size_t i = 0; i < extra.rows.size(); ++i) {
        if (extra.rows[i].key != target.key) continue;
        targets.push_back({target.name.c_str(), &specs[i], target.goal, target.at_least});
      }
    }
    checks = CheckTargets(table, extra.target_engine, targets);
  }
  BuiltTable(const BuiltTable&) = delete;
  BuiltTable& operator=(const BuiltTable&) = delete;

  const ExtraTable* source;
  std::vector<CaseSpec> specs;  // one per row, filled before anything points in
  std::vector<Target> targets;
  Table table;
  std::vector<TargetResult> checks;
};

// ---------------------------------------------------------------------------
// JSON: the same figures, by hand; every string here is plain ASCII.

std::string JsonNumber(double value) {
  return std::isfinite(value) ? absl::StrFormat("%.10g", value) : "null";
}

std::string JsonRows(const Table& table) {
  std::vector<std::string> rows;
  for (const TableRow& row : table.rows) {
    std::vector<std::string> values;
    for (const auto& [column, value] : row.values) {
      values.push_back(absl::StrCat(JsonString(column), ": ", JsonNumber(value)));
    }
    rows.push_back(
        absl::StrFormat("    {\"case\": %s, \"label\": %s, \"unit\": %s, \"values\": {%s}}",
                        JsonString(row.spec->key), JsonString(row.label),
                        JsonString(row.spec->unit), absl::StrJoin(values, ", ")));
  }
  return absl::StrJoin(rows, ",\n");
}

std::string JsonTargets(const std::vector<TargetResult>& checks, const std::string& engine) {
  std::vector<std::string> targets;
  for (const TargetResult& check : checks) {
    targets.push_back(absl::StrFormat(
        "    {\"name\": %s, \"engine\": %s, \"unit\": %s, \"goal\": %s, \"at_least\": %s, "
        "\"measured\": %s, \"pass\": %s}",
        JsonString(check.target->name), JsonString(engine), JsonString(check.target->spec->unit),
        JsonNumber(check.target->goal), check.target->at_least ? "true" : "false",
        check.measured ? JsonNumber(*check.measured) : "null", check.pass() ? "true" : "false"));
  }
  return absl::StrJoin(targets, ",\n");
}

std::string JsonNotes(const Table& table) {
  std::vector<std::string> notes;
  for (const std::string& note : table.notes) notes.push_back(JsonString(note));
  return absl::StrJoin(notes, ", ");
}

std::string JsonExtraTables(const std::deque<BuiltTable>& tables) {
  std::vector<std::string> objects;
  for (const BuiltTable& built : tables) {
    objects.push_back(absl::StrFormat(
        "    {\"title\": %s, \"notes\": [%s], \"rows\": [\n%s\n    ],\n    \"targets\": "
        "[\n%s\n    ]}",
        JsonString(built.source->title), JsonNotes(built.table), JsonRows(built.table),
        JsonTargets(built.checks, built.source->target_engine)));
  }
  return absl::StrJoin(objects, ",\n");
}

void WriteJson(const std::string& path, const ReportSpec& spec, const Table& table,
               const std::vector<TargetResult>& checks, const std::deque<BuiltTable>& extra) {
  const std::string json = absl::StrFormat(
      "{\n  \"benchmark\": \"ember-bench-engine\",\n  \"options\": %s,\n  \"hardware_threads\": "
      "%d,\n  \"notes\": [%s],\n  \"dag_results_match_serial\": %s,\n  \"rows\": [\n%s\n  ],\n"
      "  \"targets\": [\n%s\n  ],\n  \"tables\": [\n%s\n  ]\n}\n",
      spec.options_json, std::thread::hardware_concurrency(), JsonNotes(table),
      spec.dag_ok ? "true" : "false", JsonRows(table), JsonTargets(checks, spec.target_engine),
      JsonExtraTables(extra));
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr || std::fputs(json.c_str(), file) < 0 || std::fclose(file) != 0) {
    throw Error(absl::StrCat("[ember-bench-engine] cannot write --json=", path));
  }
}

}  // namespace

std::string JsonString(std::string_view text) {
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') quoted.push_back('\\');
    quoted.push_back(c);
  }
  return quoted + "\"";
}

void Report(const ReportSpec& spec, Results results, const std::string& json_path) {
  const Table table = MakeTable(spec, std::move(results));
  PrintTable(table);
  const std::vector<TargetResult> checks = CheckTargets(table, spec.target_engine, kTargets);
  PrintTargets(checks, absl::StrCat("Targets for ", spec.target_engine, " (2-core machine)"));
  std::deque<BuiltTable> extra;
  for (const ExtraTable& source : spec.tables) {
    const BuiltTable& built = extra.emplace_back(source);
    absl::PrintF("\n%s\n", source.title);
    PrintTable(built.table);
    PrintTargets(built.checks, absl::StrCat("Targets for ", source.target_engine));
  }
  if (!json_path.empty()) WriteJson(json_path, spec, table, checks, extra);
}

}  // namespace ember::bench
