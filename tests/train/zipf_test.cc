// ZipfSampler: the drawn ranks follow Zipf's law (frequencies against the
// exact probabilities), at alpha 0 (uniform), near 1 and far above, on
// tables of one row and of 2^40 rows.

#include "tools/train/data/zipf.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "engine/error.h"
#include "tests/train/data_test_util.h"
#include "tools/train/data/counter_rng.h"

namespace ember::train {
namespace {

using testing::ExpectThrowWith;

// Counts of each rank in `draws` draws.
std::vector<int64_t> Histogram(const ZipfSampler& zipf, int draws, uint64_t seed) {
  std::vector<int64_t> counts(static_cast<size_t>(zipf.n()), 0);
  CounterRng rng(seed);
  for (int i = 0; i < draws; ++i) {
    const int64_t k = zipf.Sample([&rng] { return rng.NextDouble(); });
    EXPECT_GE(k, 0);
    EXPECT_LT(k, zipf.n());
    ++counts[static_cast<size_t>(k)];
  }
  return counts;
}

// Each rank's count lies within 5 standard deviations of its expectation.
void ExpectFollows(const ZipfSampler& zipf, const std::vector<int64_t>& counts, int draws,
                   int ranks) {
  for (int k = 0; k < ranks; ++k) {
    const double p = zipf.Probability(k);
    const double expected = p * draws;
    const double sd = std::sqrt(draws * p * (1 - p)) + 1.0;
    EXPECT_NEAR(static_cast<double>(counts[static_cast<size_t>(k)]), expected, 5 * sd)
        << "rank " << k << " of n = " << zipf.n() << ", alpha = " << zipf.alpha();
  }
}

TEST(ZipfSampler, FollowsZipfsLawNearOne) {
  const ZipfSampler zipf(1000, 1.05);
  constexpr int kDraws = 200000;
  const auto counts = Histogram(zipf, kDraws, 1);
  ExpectFollows(zipf, counts, kDraws, 50);
  // The head is much hotter than the tail: rank 0 against rank 99 is
  // 100^1.05 ~ 126 times as likely.
  EXPECT_GT(counts[0], 50 * std::max<int64_t>(counts[99], 1));
}

TEST(ZipfSampler, FollowsZipfsLawFarAboveOne) {
  const ZipfSampler zipf(50, 2.5);
  constexpr int kDraws = 100000;
  ExpectFollows(zipf, Histogram(zipf, kDraws, 2), kDraws, 50);
}

TEST(ZipfSampler, AlphaZeroIsUniform) {
  const ZipfSampler zipf(20, 0.0);
  constexpr int kDraws = 100000;
  ExpectFollows(zipf, Histogram(zipf, kDraws, 3), kDraws, 20);
}

TEST(ZipfSampler, OneRowAndHugeTables) {
  EXPECT_EQ(Histogram(ZipfSampler(1, 1.2), 100, 4)[0], 100);
  const ZipfSampler huge(int64_t{1} << 40, 1.05);
  CounterRng rng(5);
  int64_t largest = 0;
  for (int i = 0; i < 10000; ++i) {
    const int64_t k = huge.Sample([&rng] { return rng.NextDouble(); });
    ASSERT_GE(k, 0);
    ASSERT_LT(k, huge.n());
    largest = std::max(largest, k);
  }
  // The tail of a 2^40-row table is reached (P(k >= 2^20) is about 0.3).
  EXPECT_GT(largest, int64_t{1} << 20);
}

TEST(ZipfSampler, RefusesBadParameters) {
  ExpectThrowWith<InvalidArgument>([] { ZipfSampler(0, 1.0); }, {"[ZipfSampler]", "n = 0"});
  ExpectThrowWith<InvalidArgument>([] { ZipfSampler(10, -1.0); }, {"[ZipfSampler]", "alpha = -1"});
  ExpectThrowWith<InvalidArgument>([] { ZipfSampler(10, NAN); }, {"alpha = nan"});
}

}  // namespace
}  // namespace ember::train
