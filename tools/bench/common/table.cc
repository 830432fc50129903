#include "tools/bench/common/table.h"

#include <algorithm>
#include <utility>

namespace ember::bench {

void Table::AddRow(Row row) {
  if (!row.values.empty()) rows.push_back(std::move(row));
}

void Table::AddRow(const Results& results, const std::string& key, const std::string& unit,
                   std::string label, Stat stat, const std::string& source) {
  Row row{key, unit, std::move(label), {}};
  for (const std::string& column : columns) {
    if (auto value = results.Get(source.empty() ? key : source, column, stat)) {
      row.values[column] = *value;
    }
  }
  AddRow(std::move(row));
}

const Table::Row* Table::FindRow(const std::string& key) const {
  for (const Row& row : rows) {
    if (row.key == key) return &row;
  }
  return nullptr;
}

std::optional<double> Table::Value(const std::string& key, const std::string& column) const {
  const Row* row = FindRow(key);
  if (row == nullptr) return std::nullopt;
  auto it = row->values.find(column);
  if (it == row->values.end()) return std::nullopt;
  return it->second;
}

void Table::DropEmptyColumns() {
  std::erase_if(columns, [&](const std::string& column) {
    return std::none_of(rows.begin(), rows.end(),
                        [&](const Row& row) { return row.values.contains(column); });
  });
}

std::vector<TargetCheck> CheckTargets(const Table& table) {
  std::vector<TargetCheck> checks;
  if (table.rows.empty()) return checks;
  for (const Table::Target& target : table.targets) {
    const std::string& column = target.column.empty() ? table.target_column : target.column;
    const Table::Row* row = table.FindRow(target.key);
    checks.push_back(
        {&target, column, row != nullptr ? row->unit : "", table.Value(target.key, column)});
  }
  return checks;
}

}  // namespace ember::bench
