#include "tools/bench/common/json_writer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/error.h"

namespace ember::bench {
namespace {

// The opening and closing of a container whose items go one a line at
// `indent` spaces, the closing bracket two spaces less.
std::string JoinContainer(const std::vector<std::string>& items, int indent, char open,
                          char close) {
  if (items.empty()) return {open, close};
  if (indent < 0)
    return absl::StrCat(std::string(1, open), absl::StrJoin(items, ", "), std::string(1, close));
  const std::string pad(indent, ' ');
  return absl::StrCat(std::string(1, open), "\n", pad,
                      absl::StrJoin(items, absl::StrCat(",\n", pad)), "\n",
                      std::string(std::max(0, indent - 2), ' '), std::string(1, close));
}

}  // namespace

std::string JsonString(std::string_view text) {
  std::string quoted = "\"";
  for (char c : text) {
    switch (c) {
      case '"':
        quoted += "\\\"";
        break;
      case '\\':
        quoted += "\\\\";
        break;
      case '\n':
        quoted += "\\n";
        break;
      case '\t':
        quoted += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          quoted += absl::StrFormat("\\u%04x", static_cast<int>(c));
        } else {
          quoted.push_back(c);
        }
    }
  }
  return quoted + "\"";
}

std::string JsonNumber(double value) {
  return std::isfinite(value) ? absl::StrFormat("%.10g", value) : "null";
}

std::string JsonBool(bool value) { return value ? "true" : "false"; }

std::string JsonArray(const std::vector<std::string>& items, int indent) {
  return JoinContainer(items, indent, '[', ']');
}

std::string JsonStrings(const std::vector<std::string>& texts) {
  std::vector<std::string> items;
  for (const std::string& text : texts) items.push_back(JsonString(text));
  return JsonArray(items);
}

JsonObject& JsonObject::Add(std::string_view key, std::string value_json) {
  fields_.emplace_back(std::string(key), std::move(value_json));
  return *this;
}

std::string JsonObject::Render(int indent) const {
  std::vector<std::string> items;
  for (const auto& [key, value] : fields_)
    items.push_back(absl::StrCat(JsonString(key), ": ", value));
  return JoinContainer(items, indent, '{', '}');
}

std::string TableJson(const Table& table) {
  std::vector<std::string> rows;
  for (const Table::Row& row : table.rows) {
    JsonObject values;
    for (const auto& [column, value] : row.values) values.Add(column, JsonNumber(value));
    rows.push_back(JsonObject()
                       .Add("case", JsonString(row.key))
                       .Add("label", JsonString(row.label))
                       .Add("unit", JsonString(row.unit))
                       .Add("values", values.Render())
                       .Render());
  }
  std::vector<std::string> targets;
  for (const TargetCheck& check : CheckTargets(table)) {
    targets.push_back(JsonObject()
                          .Add("name", JsonString(check.target->name))
                          .Add("column", JsonString(check.column))
                          .Add("case", JsonString(check.target->key))
                          .Add("unit", JsonString(check.unit))
                          .Add("goal", JsonNumber(check.target->goal))
                          .Add("at_least", JsonBool(check.target->at_least))
                          .Add("measured", check.measured ? JsonNumber(*check.measured) : "null")
                          .Add("pass", JsonBool(check.pass()))
                          .Render());
  }
  return JsonObject()
      .Add("title", JsonString(table.title))
      .Add("target_column", JsonString(table.target_column))
      .Add("columns", JsonStrings(table.columns))
      .Add("notes", JsonArray(
                        [&] {
                          std::vector<std::string> notes;
                          for (const std::string& note : table.notes)
                            notes.push_back(JsonString(note));
                          return notes;
                        }(),
                        8))
      .Add("rows", JsonArray(rows, 8))
      .Add("targets", JsonArray(targets, 8))
      .Render(6);
}

std::vector<std::string> TablesJson(const std::vector<Table>& tables) {
  std::vector<std::string> items;
  for (const Table& table : tables) items.push_back(TableJson(table));
  return items;
}

std::string ResultsJson(const Results& results) {
  std::vector<std::string> items;
  for (const auto& [key, values] : results.all()) {
    std::vector<std::string> runs;
    for (double value : values) runs.push_back(JsonNumber(value));
    items.push_back(JsonObject()
                        .Add("case", JsonString(key.first))
                        .Add("column", JsonString(key.second))
                        .Add("runs", JsonArray(runs))
                        .Render());
  }
  return JsonArray(items, 4);
}

void WriteJsonFile(const std::string& path, const std::string& json, std::string_view who) {
  std::FILE* file = std::fopen(path.c_str(), "w");
  const bool written = file != nullptr && std::fputs(json.c_str(), file) >= 0;
  if (file == nullptr || std::fclose(file) != 0 || !written) {
    throw Error(absl::StrCat("[", std::string(who), "] cannot write --json=", path));
  }
}

}  // namespace ember::bench
