#pragma once

// The lookups of ember-bench-cache: rows of a table drawn from Zipf(alpha)
// over its rows, P(rank k) proportional to (k + 1)^-alpha (alpha 0:
// uniform), by Walker's alias method: O(rows) to build, O(1) a draw. Rank k
// is row (k * 2654435761 + salt) mod rows, a bijection (2654435761 is a
// prime) that spreads the hot ranks over the table, so that they are not
// its first rows; tables of one shape share a ZipfRows and differ in their
// salt. Every draw is a function of (seed, stream, i, salt) only: a batch
// can be made again, alone, from its number.
//
// A Trace is what the hit-rate simulators take: per batch its distinct
// rows.
//
// Thread safety: a ZipfRows is immutable after construction; Draw may run
// concurrently.

#include <cstdint>
#include <span>
#include <vector>

namespace ember::bench::cache_bench {

class ZipfRows {
 public:
  // Rows [0, rows), Zipf(alpha) over ranks. REQUIRES: 0 < rows < 2^31 (the
  // alias table holds i32), alpha >= 0.
  ZipfRows(int64_t rows, double alpha);

  [[nodiscard]] int64_t rows() const { return rows_; }
  [[nodiscard]] double alpha() const { return alpha_; }

  // Fills `out` with draws number [0, out.size()) of stream `stream` of
  // `seed`, ranks placed by `salt` (one per table).
  void Draw(uint64_t seed, uint64_t stream, std::span<int64_t> out, uint64_t salt = 0) const;

  // The probability of rank k (for tests and estimates).
  [[nodiscard]] double RankProbability(int64_t k) const;

 private:
  int64_t rows_;
  double alpha_;
  double norm_ = 1;             // sum of (k + 1)^-alpha
  std::vector<double> accept_;  // alias method: keep rank i with this chance...
  std::vector<int32_t> alias_;  // ...else take alias_[i]
};

// Per batch, its distinct rows (in increasing order).
using Trace = std::vector<std::vector<int64_t>>;

// `rows` without repeats, in increasing order.
[[nodiscard]] std::vector<int64_t> DistinctRows(std::vector<int64_t> rows);

// The 64 random bits number `counter` of (seed, stream): SplitMix64 of a
// mix of the three. The same generator everywhere in the bench.
[[nodiscard]] uint64_t RandomBits(uint64_t seed, uint64_t stream, uint64_t counter);

}  // namespace ember::bench::cache_bench
