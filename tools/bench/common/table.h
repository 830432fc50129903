#pragma once

// Table: what every bench reports. One row per case (a figure and its unit,
// one value per column: an engine, a peer, an allocator), the targets the
// rows are checked against, and notes that say how the figures were taken.
// table_printer.h prints it; json_writer.h writes it as JSON.
//
// Thread safety: none; a Table is a plain value.

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tools/bench/common/results.h"

namespace ember::bench {

struct Table {
  struct Row {
    std::string key;  // unique in the table: the row's "case" in JSON
    std::string unit;
    std::string label;
    std::map<std::string, double> values;  // by column; absent: not run
  };

  // A goal for one row's value in one column.
  struct Target {
    Target(std::string name, std::string key, double goal, bool at_least, std::string column = "")
        : name(std::move(name)),
          key(std::move(key)),
          goal(goal),
          at_least(at_least),
          column(std::move(column)) {}

    std::string name;
    std::string key;  // the row it checks
    double goal;
    bool at_least;       // goal is a floor; else a ceiling
    std::string column;  // empty: the table's target_column
  };

  std::string title;          // empty: printed without a title line
  std::string target_column;  // the column the targets check by default
  std::string targets_title;  // empty: "Targets for <target_column>"
  std::vector<std::string> columns;
  std::vector<Row> rows;
  std::vector<Target> targets;
  std::vector<std::string> notes;

  // Appends `row` unless no column has a value in it.
  void AddRow(Row row);
  // Appends a row keyed `key` of `stat` over every column's runs of case
  // `source` of `results` (empty: `key`), unless no column ran it.
  void AddRow(const Results& results, const std::string& key, const std::string& unit,
              std::string label, Stat stat = Stat::kMedian, const std::string& source = "");

  // The row `key`, or null.
  [[nodiscard]] const Row* FindRow(const std::string& key) const;
  // The value of row `key` in `column`, if both are there.
  [[nodiscard]] std::optional<double> Value(const std::string& key,
                                            const std::string& column) const;

  // Drops the columns that no row has a value in.
  void DropEmptyColumns();
};

// One target against its measured value.
struct TargetCheck {
  const Table::Target* target;
  std::string column;
  std::string unit;                // the row's; empty when the row is missing
  std::optional<double> measured;  // absent: not run

  [[nodiscard]] bool pass() const {
    return measured && (target->at_least ? *measured >= target->goal : *measured <= target->goal);
  }
};

// Every target of `table` against its row; none when the table has no rows
// (none of its cases ran). The checks point into `table`.
[[nodiscard]] std::vector<TargetCheck> CheckTargets(const Table& table);

}  // namespace ember::bench
