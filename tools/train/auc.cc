#include "tools/train/auc.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include <fmt/format.h>

#include "engine/error.h"

namespace ember::train {

// Mann-Whitney: AUC = (sum of the positives' ranks - P (P + 1) / 2) / (P N),
// with tied scores sharing their mean rank.
double RocAuc(std::span<const float> scores, std::span<const float> labels) {
  if (scores.size() != labels.size()) {
    throw InvalidArgument(
        fmt::format("[RocAuc] {} scores but {} labels", scores.size(), labels.size()));
  }
  // A diverged model's NaN scores have no order: sorting them is undefined
  // and the tie scan below would never pass one. Their AUC is undefined too.
  if (std::any_of(scores.begin(), scores.end(), [](float s) { return std::isnan(s); })) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  const std::size_t n = scores.size();
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(),
            [&](uint32_t a, uint32_t b) { return scores[a] < scores[b]; });
  double positive_ranks = 0.0;
  double positives = 0.0;
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i;
    while (j < n && scores[order[j]] == scores[order[i]]) ++j;
    const double mean_rank = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2.0;
    for (std::size_t k = i; k < j; ++k) {
      if (labels[order[k]] >= 0.5f) {
        positive_ranks += mean_rank;
        positives += 1.0;
      }
    }
    i = j;
  }
  const double negatives = static_cast<double>(n) - positives;
  if (positives == 0.0 || negatives == 0.0) return std::numeric_limits<double>::quiet_NaN();
  return (positive_ranks - positives * (positives + 1.0) / 2.0) / (positives * negatives);
}

}  // namespace ember::train
