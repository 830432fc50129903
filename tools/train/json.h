#pragma once

// Json: a JSON value (null, bool, number, string, array, object with its
// keys in insertion order), parsed from text and written back. Enough for
// what the runtime reads (the engine's Chrome traces) and writes (--json
// reports); not a general-purpose library.
//
// Thread safety: a value; const methods may run concurrently.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace ember::train {

class Json {
 public:
  using Array = std::vector<Json>;
  using Object = std::vector<std::pair<std::string, Json>>;

  Json() = default;                                             // null
  Json(bool value) : value_(value) {}                           // NOLINT: implicit by design
  Json(double value) : value_(value) {}                         // NOLINT
  Json(int value) : value_(static_cast<double>(value)) {}       // NOLINT
  Json(int64_t value) : value_(static_cast<double>(value)) {}   // NOLINT
  Json(uint64_t value) : value_(static_cast<double>(value)) {}  // NOLINT
  Json(const char* value) : value_(std::string(value)) {}       // NOLINT
  Json(std::string value) : value_(std::move(value)) {}         // NOLINT
  Json(std::string_view value) : value_(std::string(value)) {}  // NOLINT
  Json(Array value) : value_(std::move(value)) {}               // NOLINT
  Json(Object value) : value_(std::move(value)) {}              // NOLINT
  static Json MakeObject() { return Json(Object{}); }
  static Json MakeArray() { return Json(Array{}); }

  // Parses `text`. Throws InvalidArgument "[Json::Parse] ... at byte N".
  static Json Parse(std::string_view text);

  [[nodiscard]] bool is_null() const { return value_.index() == 0; }
  [[nodiscard]] bool is_number() const { return std::holds_alternative<double>(value_); }
  [[nodiscard]] bool is_string() const { return std::holds_alternative<std::string>(value_); }
  [[nodiscard]] bool is_array() const { return std::holds_alternative<Array>(value_); }
  [[nodiscard]] bool is_object() const { return std::holds_alternative<Object>(value_); }

  // The value as that type; a default (0, "", empty) when it is another.
  [[nodiscard]] double number() const;
  [[nodiscard]] const std::string& string() const;
  [[nodiscard]] const Array& array() const;
  // The member `key` of an object, or null (a static null) when absent.
  [[nodiscard]] const Json& operator[](std::string_view key) const;

  // Appends to an array; sets (or replaces) a member of an object.
  Json& Push(Json value);
  Json& Set(std::string_view key, Json value);

  // The text: compact, or indented by `indent` spaces a level. Numbers
  // that are integers are written as integers; NaN and infinities as null.
  [[nodiscard]] std::string Dump(int indent = -1) const;

 private:
  void DumpTo(std::string& out, int indent, int depth) const;

  std::variant<std::monostate, bool, double, std::string, Array, Object> value_;
};

}  // namespace ember::train
