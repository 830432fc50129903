#include "tools/bench/cache/zipf_trace.h"

#include <algorithm>
#include <cmath>

namespace ember::bench::cache_bench {
namespace {

constexpr uint64_t kSpread = 2654435761u;  // a prime: k * kSpread mod rows is a bijection

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t RandomBits(uint64_t seed, uint64_t stream, uint64_t counter) {
  return SplitMix64(SplitMix64(SplitMix64(seed) ^ stream) + counter * 0x9e3779b97f4a7c15ull);
}

// Vose's alias method: each rank's probability times `rows` is split into
// what stays with it and what one "large" rank (its alias) makes up.
ZipfRows::ZipfRows(int64_t rows, double alpha) : rows_(rows), alpha_(alpha) {
  std::vector<double> scaled(static_cast<std::size_t>(rows));
  norm_ = 0;
  for (int64_t k = 0; k < rows; ++k) norm_ += scaled[k] = std::pow(double(k + 1), -alpha);
  for (double& p : scaled) p *= double(rows) / norm_;
  accept_.assign(scaled.size(), 1.0);
  alias_.resize(scaled.size());
  std::vector<int32_t> small, large;
  for (int64_t k = 0; k < rows; ++k) {
    alias_[k] = static_cast<int32_t>(k);
    (scaled[k] < 1.0 ? small : large).push_back(static_cast<int32_t>(k));
  }
  while (!small.empty() && !large.empty()) {
    const int32_t s = small.back();
    small.pop_back();
    const int32_t l = large.back();
    accept_[s] = scaled[s];
    alias_[s] = l;
    scaled[l] -= 1.0 - scaled[s];
    if (scaled[l] < 1.0) {
      large.pop_back();
      small.push_back(l);
    }
  }
  // What is left is 1 up to rounding: kept with certainty.
}

void ZipfRows::Draw(uint64_t seed, uint64_t stream, std::span<int64_t> out, uint64_t salt) const {
  const auto n = static_cast<uint64_t>(rows_);
  salt %= n;  // so that rank * kSpread + salt cannot wrap
  for (std::size_t i = 0; i < out.size(); ++i) {
    const uint64_t bits = RandomBits(seed, stream, i);
    const uint64_t k = ((bits >> 32) * n) >> 32;               // uniform in [0, rows)
    const double coin = double(bits & 0xffffffffu) * 0x1p-32;  // uniform in [0, 1)
    const uint64_t rank = coin < accept_[k] ? k : uint64_t(alias_[k]);
    out[i] = static_cast<int64_t>((rank * kSpread + salt) % n);
  }
}

double ZipfRows::RankProbability(int64_t k) const {
  return std::pow(double(k + 1), -alpha_) / norm_;
}

std::vector<int64_t> DistinctRows(std::vector<int64_t> rows) {
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

}  // namespace ember::bench::cache_bench
