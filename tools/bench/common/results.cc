#include "tools/bench/common/results.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace ember::bench {

double Percentile(std::vector<double> values, double fraction) {
  if (values.empty()) return NAN;
  const auto rank = static_cast<size_t>(fraction * static_cast<double>(values.size() - 1) + 0.5);
  std::nth_element(values.begin(), values.begin() + rank, values.end());
  return values[rank];
}

double Summarize(const std::vector<double>& values, Stat stat) {
  if (values.empty()) return NAN;
  const auto [min, max] = std::minmax_element(values.begin(), values.end());
  switch (stat) {
    case Stat::kMedian:
      return Percentile(values, 0.5);
    case Stat::kMin:
    case Stat::kBestLower:
      return *min;
    case Stat::kMax:
    case Stat::kBestHigher:
      return *max;
    case Stat::kSpread:
      return *max / *min;
  }
  return NAN;
}

void Results::Add(const std::string& key, const std::string& column, double value) {
  samples_[{key, column}].push_back(value);
}

const std::vector<double>& Results::Samples(const std::string& key,
                                            const std::string& column) const {
  static const std::vector<double> kNone;
  auto it = samples_.find({key, column});
  return it == samples_.end() ? kNone : it->second;
}

std::optional<double> Results::Get(const std::string& key, const std::string& column,
                                   Stat stat) const {
  const std::vector<double>& values = Samples(key, column);
  if (values.empty()) return std::nullopt;
  return Summarize(values, stat);
}

void Results::AddRatios(const std::string& key, const std::string& column,
                        const std::string& num_key, const std::string& num_column,
                        const std::string& den_key, const std::string& den_column) {
  // Copies: adding under (key, column) may move the vectors being read.
  const std::vector<double> num = Samples(num_key, num_column);
  const std::vector<double> den = Samples(den_key, den_column);
  for (size_t run = 0; run < std::min(num.size(), den.size()); ++run) {
    Add(key, column, num[run] / den[run]);
  }
}

void Results::Erase(const std::string& key, const std::string& column) {
  samples_.erase({key, column});
}

void Results::Append(const Results& other) {
  for (const auto& [key, values] : other.samples_) {
    std::vector<double>& mine = samples_[key];
    mine.insert(mine.end(), values.begin(), values.end());
  }
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
      Add(std::string(fields[0]), std::string(fields[1]), value);
    }
  }
}

}  // namespace ember::bench
