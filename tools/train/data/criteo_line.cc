#include "tools/train/data/criteo_line.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

#include <absl/strings/escaping.h>
#include <absl/strings/str_cat.h>

namespace ember::train {
namespace {

// The longest field text a message quotes.
constexpr size_t kQuoteChars = 32;

// CriteoDense of the small counts, which most values are: a lookup instead
// of a log1p, the same float.
constexpr int64_t kDenseTable = 4096;
const std::array<float, kDenseTable>& DenseTable() {
  static const std::array<float, kDenseTable> table = [] {
    std::array<float, kDenseTable> t{};
    for (int64_t x = 0; x < kDenseTable; ++x) {
      t[static_cast<size_t>(x)] = static_cast<float>(std::log1p(static_cast<double>(x)));
    }
    return t;
  }();
  return table;
}

CriteoLineError FieldError(int field, std::string_view text, std::string_view reason) {
  return CriteoLineError{.field = field, .text = text, .reason = reason};
}

}  // namespace

float CriteoDense(int64_t x) {
  if (x < 0) x = 0;
  if (x < kDenseTable) return DenseTable()[static_cast<size_t>(x)];
  return static_cast<float>(std::log1p(static_cast<double>(x)));
}

std::optional<CriteoLineError> ParseCriteoLine(std::string_view line, std::span<const int64_t> rows,
                                               CriteoRecord* record) {
  const auto tabs = std::count(line.begin(), line.end(), '\t');
  if (tabs != kCriteoNumFields - 1) {
    return CriteoLineError{.field = 0, .text = line, .reason = {}, .num_fields = tabs + 1};
  }
  const char* p = line.data();
  const char* const end = p + line.size();
  // The next field: [p, its tab or the end); p moves past the tab.
  const auto next_field = [&p, end]() {
    const void* tab = std::memchr(p, '\t', static_cast<size_t>(end - p));
    const char* stop = tab != nullptr ? static_cast<const char*>(tab) : end;
    std::string_view field(p, static_cast<size_t>(stop - p));
    p = stop == end ? end : stop + 1;
    return field;
  };

  const std::string_view label = next_field();
  if (label == "0") {
    record->label = 0.0f;
  } else if (label == "1") {
    record->label = 1.0f;
  } else {
    return FieldError(1, label, label.empty() ? "the label is empty" : "the label is not 0 or 1");
  }
  for (int j = 0; j < kCriteoNumDense; ++j) {
    const std::string_view field = next_field();
    int64_t x = 0;
    if (!field.empty()) {
      const auto [ptr, ec] = std::from_chars(field.data(), field.data() + field.size(), x);
      if (ec == std::errc::result_out_of_range) {
        return FieldError(2 + j, field, "the integer does not fit 64 bits");
      }
      if (ec != std::errc() || ptr != field.data() + field.size()) {
        return FieldError(2 + j, field, "not an integer");
      }
    }
    record->dense[j] = CriteoDense(x);
  }
  for (int t = 0; t < kCriteoNumSparse; ++t) {
    const std::string_view field = next_field();
    uint32_t v = 0;
    if (!field.empty()) {
      const auto [ptr, ec] = std::from_chars(field.data(), field.data() + field.size(), v, 16);
      if (ec == std::errc::result_out_of_range) {
        return FieldError(2 + kCriteoNumDense + t, field,
                          "the hexadecimal number does not fit 32 bits");
      }
      if (ec != std::errc() || ptr != field.data() + field.size()) {
        return FieldError(2 + kCriteoNumDense + t, field, "not a hexadecimal number");
      }
    }
    record->sparse[t] = CriteoRow(v, rows[t]);
  }
  return std::nullopt;
}

std::string DescribeCriteoLineError(const CriteoLineError& error) {
  if (error.field == 0) {
    if (error.num_fields == 1 && error.text.empty()) {
      return absl::StrCat("is empty; a Criteo line has ", kCriteoNumFields, " fields");
    }
    return absl::StrCat("has ", error.num_fields, error.num_fields == 1 ? " field" : " fields",
                        "; a Criteo line has ", kCriteoNumFields);
  }
  std::string quoted = absl::CEscape(std::string(error.text.substr(0, kQuoteChars)));
  if (error.text.size() > kQuoteChars) quoted += "...";
  return absl::StrCat("field ", error.field, " ('", quoted, "'): ", std::string(error.reason));
}

}  // namespace ember::train
