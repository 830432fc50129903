#include "tools/bench/common/table_printer.h"

#include <algorithm>
#include <cctype>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ember::bench {
namespace {

constexpr int kLabelWidth = 40;
constexpr int kColumnWidth = 12;

// Short column headers keep the engine tables within about 100 characters.
std::string ShortName(const std::string& column) {
  std::string name = column;
  for (const auto& [prefix, short_name] :
       {std::pair{"ThreadedEnginePerDevice", "PerDevice"}, std::pair{"ThreadedEngine", "Threaded"},
        std::pair{"NaiveEngine", "Naive"}, std::pair{"TBB flow graph", "TBB flow"}}) {
    if (name.starts_with(prefix)) {
      name = short_name + name.substr(std::string_view(prefix).size());
      break;
    }
  }
  for (const auto& [suffix, short_name] :
       {std::pair{" PushSync", " sync"}, std::pair{" PushAsync", " async"}}) {
    if (name.ends_with(suffix)) {
      name = name.substr(0, name.size() - std::string_view(suffix).size()) + short_name;
    }
  }
  return name;
}

int ColumnWidth(const std::string& column) {
  return std::max<int>(kColumnWidth, static_cast<int>(ShortName(column).size()));
}

std::string WithUnit(const std::string& unit, double value) {
  const std::string text = FormatValue(unit, value);
  return unit == "x" || unit.empty() ? text : absl::StrCat(text, " ", unit);
}

void PrintTargets(const Table& table, std::FILE* out) {
  const std::vector<TargetCheck> checks = CheckTargets(table);
  if (checks.empty()) return;
  const std::string title = table.targets_title.empty()
                                ? absl::StrCat("Targets for ", table.target_column)
                                : table.targets_title;
  absl::FPrintF(out, "\n%s:\n", title);
  for (const TargetCheck& check : checks) {
    const Table::Target& target = *check.target;
    const std::string measured = check.measured ? WithUnit(check.unit, *check.measured) : "-";
    absl::FPrintF(out, "  %-40s %18s   %s %-18s %s\n", target.name, measured,
                  target.at_least ? ">=" : "<=", WithUnit(check.unit, target.goal),
                  !check.measured ? "not run"
                  : check.pass()  ? "PASS"
                                  : "FAIL");
  }
}

}  // namespace

std::string WithCommas(double value) {
  std::string digits = absl::StrFormat("%.0f", value);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0 && std::isdigit(digits[i - 1]); i -= 3) {
    digits.insert(i, ",");
  }
  return digits;
}

std::string FormatValue(const std::string& unit, double value) {
  if (unit.ends_with("/s") || unit == "count") return WithCommas(value);
  if (unit == "x") return absl::StrFormat("%.2fx", value);
  return absl::StrFormat("%.2f", value);
}

// The unit column is as wide as its longest unit; a value column 12
// characters, or as wide as its header.
void PrintTable(const Table& table, std::FILE* out) {
  if (table.rows.empty() && table.notes.empty()) return;
  if (!table.title.empty()) absl::FPrintF(out, "%s\n", table.title);
  int unit_width = 6;
  for (const Table::Row& row : table.rows) {
    unit_width = std::max<int>(unit_width, static_cast<int>(row.unit.size()));
  }
  if (!table.rows.empty()) {
    std::string header = absl::StrFormat("%-*s %-*s", kLabelWidth, "case", unit_width, "unit");
    for (const std::string& column : table.columns) {
      absl::StrAppend(&header, absl::StrFormat(" %*s", ColumnWidth(column), ShortName(column)));
    }
    absl::FPrintF(out, "%s\n%s\n", header, std::string(header.size(), '-'));
  }
  for (const Table::Row& row : table.rows) {
    std::string line = absl::StrFormat("%-*s %-*s", kLabelWidth, row.label, unit_width, row.unit);
    for (const std::string& column : table.columns) {
      auto it = row.values.find(column);
      const std::string cell = it == row.values.end() ? "-" : FormatValue(row.unit, it->second);
      absl::StrAppend(&line, absl::StrFormat(" %*s", ColumnWidth(column), cell));
    }
    absl::FPrintF(out, "%s\n", line);
  }
  for (const std::string& note : table.notes) absl::FPrintF(out, "%s\n", note);
  PrintTargets(table, out);
}

void PrintTables(const std::vector<Table>& tables, std::FILE* out) {
  bool first = true;
  for (const Table& table : tables) {
    if (table.rows.empty() && table.notes.empty()) continue;
    if (!first) absl::FPrintF(out, "\n");
    first = false;
    PrintTable(table, out);
  }
}

}  // namespace ember::bench
