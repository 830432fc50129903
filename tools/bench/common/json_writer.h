#pragma once

// The JSON every bench writes with --json=PATH, built by hand (the benches
// need no JSON library for a few hundred lines of output). The values come
// as JSON text: JsonString, JsonNumber and JsonBool make the leaves,
// JsonArray and JsonObject the containers, and TableJson and ResultsJson
// the shapes every bench shares:
//
//   table:   {"title", "target_column", "columns", "notes",
//             "rows": [{"case", "label", "unit", "values": {column: value}}],
//             "targets": [{"name", "column", "case", "unit", "goal",
//                          "at_least", "measured", "pass"}]}
//   samples: [{"case", "column", "runs": [every run's figure]}]
//
// Non-finite numbers are written as null.
//
// Thread safety: thread-safe (pure functions; a JsonObject is a value).

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tools/bench/common/results.h"
#include "tools/bench/common/table.h"

namespace ember::bench {

// `text` as a JSON string: quotes, backslashes and control characters
// escaped.
[[nodiscard]] std::string JsonString(std::string_view text);
[[nodiscard]] std::string JsonNumber(double value);
[[nodiscard]] std::string JsonBool(bool value);

// `items` (JSON text each) as an array: on one line, or one item a line
// indented by `indent` spaces when indent >= 0.
[[nodiscard]] std::string JsonArray(const std::vector<std::string>& items, int indent = -1);
// `texts` as an array of JSON strings, on one line.
[[nodiscard]] std::string JsonStrings(const std::vector<std::string>& texts);

// An object whose fields keep the order they were added in.
class JsonObject {
 public:
  // Adds a field whose value is JSON text already.
  JsonObject& Add(std::string_view key, std::string value_json);

  // On one line, or one field a line indented by `indent` spaces.
  [[nodiscard]] std::string Render(int indent = -1) const;

 private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

[[nodiscard]] std::string TableJson(const Table& table);
[[nodiscard]] std::vector<std::string> TablesJson(const std::vector<Table>& tables);
[[nodiscard]] std::string ResultsJson(const Results& results);

// Writes `json` to `path`. Throws Error "[who] cannot write --json=PATH".
void WriteJsonFile(const std::string& path, const std::string& json, std::string_view who);

}  // namespace ember::bench
