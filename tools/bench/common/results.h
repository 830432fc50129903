#pragma once

// Results: every run's figure of a bench, by case and column (an engine, a
// peer, an allocator), in run order; and the summaries a report makes of
// them. Run i of one column and run i of another were taken in the same
// round, a moment apart, so a ratio pairs them run by run (AddRatios): a
// slow spell of a shared machine then cancels out of the ratio instead of
// skewing it.
//
// Thread safety: none; one thread fills and reads a Results.

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace ember::bench {

// The value at `fraction` (0.5: the median) of `values`, by nearest rank;
// NaN for none.
[[nodiscard]] double Percentile(std::vector<double> values, double fraction);

// How a row sums up a case's runs.
enum class Stat {
  kMedian,
  kMin,
  kMax,
  kSpread,      // max / min: how far apart the runs are
  kBestHigher,  // the largest (for figures where higher is better)
  kBestLower,   // the smallest (for times)
};

// `stat` of `values`; NaN for none.
[[nodiscard]] double Summarize(const std::vector<double>& values, Stat stat);

class Results {
 public:
  using Key = std::pair<std::string, std::string>;  // (case, column)

  // Records one run's figure; runs of one case and column keep their order.
  void Add(const std::string& key, const std::string& column, double value);

  // A case's figures in run order; empty if it was not run.
  [[nodiscard]] const std::vector<double>& Samples(const std::string& key,
                                                   const std::string& column) const;

  // `stat` of a case's runs, or nothing if it was not run.
  [[nodiscard]] std::optional<double> Get(const std::string& key, const std::string& column,
                                          Stat stat = Stat::kMedian) const;

  // For every run i that both have: num[i] / den[i], recorded under
  // (key, column). Nothing when either was not run.
  void AddRatios(const std::string& key, const std::string& column, const std::string& num_key,
                 const std::string& num_column, const std::string& den_key,
                 const std::string& den_column);

  // Forgets a case of a column (a ratio that means nothing there).
  void Erase(const std::string& key, const std::string& column);

  // Adds every figure of `other` after this one's.
  void Append(const Results& other);

  [[nodiscard]] const std::map<Key, std::vector<double>>& all() const { return samples_; }

  // One "case<TAB>column<TAB>value" line per figure, so that a child
  // process can hand its figures to the parent; Merge reads them back.
  [[nodiscard]] std::string Serialize() const;
  void Merge(absl::string_view text);  // Debian's Abseil has its own string_view

 private:
  std::map<Key, std::vector<double>> samples_;
};

}  // namespace ember::bench
