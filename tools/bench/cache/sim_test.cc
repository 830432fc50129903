// The hit-rate references of ember-bench-cache on traces small enough to
// check by hand, and the Zipf draws they run on.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "tools/bench/cache/belady_sim.h"
#include "tools/bench/cache/lru_sim.h"
#include "tools/bench/cache/zipf_trace.h"

namespace ember::bench::cache_bench {
namespace {

std::vector<int64_t> Misses(const std::vector<SimCounts>& counts) {
  std::vector<int64_t> misses;
  for (const SimCounts& c : counts) misses.push_back(c.misses);
  return misses;
}

// Six batches over five rows, three cached. By hand:
//  LRU (oldest first)            Belady (next use in brackets)
//  {1,2}  2 misses  [1 2]          2 misses  keep 1[2] 2[3]
//  {3,4}  2 misses  [2 3 4]        2 misses  keep 1[2] 2[3] 3[3], drop 4[4]
//  {1,5}  2 misses  [4 1 5]        1 miss    keep 5[4] 2[3] 3[3], drop 1[5]
//  {2,3}  2 misses  [5 2 3]        0 misses  keep 2[5] 5[4] 3[never]
//  {4,5}  1 miss    [3 4 5]        1 miss    keep 2[5] and two never used again
//  {1,2}  2 misses  [5 1 2]        1 miss
const Trace kSixBatches = {{1, 2}, {3, 4}, {1, 5}, {2, 3}, {4, 5}, {1, 2}};

TEST(LruSim, CountsHandCheckedMisses) {
  EXPECT_EQ(Misses(SimulateLru(kSixBatches, 3)), (std::vector<int64_t>{2, 2, 2, 2, 1, 2}));
}

TEST(LruSim, KeepsTheMostRecentRows) {
  LruSim lru(3);
  for (const std::vector<int64_t>& batch : kSixBatches) (void)lru.Step(batch);
  EXPECT_EQ(lru.size(), 3);
  for (int64_t row : {5, 1, 2}) EXPECT_TRUE(lru.Contains(row)) << row;
  for (int64_t row : {3, 4}) EXPECT_FALSE(lru.Contains(row)) << row;
}

TEST(LruSim, ABatchLargerThanTheCacheKeepsItsLastRows) {
  LruSim lru(2);
  EXPECT_EQ(lru.Step(std::vector<int64_t>{1, 2, 3}).misses, 3);
  EXPECT_FALSE(lru.Contains(1));
  EXPECT_EQ(lru.Step(std::vector<int64_t>{1, 2, 3}).misses, 1);
}

TEST(LruSim, ZeroCapacityMissesEverything) {
  EXPECT_EQ(Misses(SimulateLru({{1}, {1}, {1}}, 0)), (std::vector<int64_t>{1, 1, 1}));
}

TEST(BeladySim, CountsHandCheckedMisses) {
  EXPECT_EQ(Misses(SimulateBelady(kSixBatches, 3)), (std::vector<int64_t>{2, 2, 1, 0, 1, 1}));
}

TEST(BeladySim, CountsEveryDistinctRow) {
  for (const SimCounts& c : SimulateBelady(kSixBatches, 3)) EXPECT_EQ(c.unique, 2);
}

TEST(BeladySim, ABatchLargerThanTheCacheMissesOnlyWhatItDropped) {
  EXPECT_EQ(Misses(SimulateBelady({{1, 2, 3}, {1, 2, 3}}, 2)), (std::vector<int64_t>{3, 1}));
}

TEST(BeladySim, DropsRowsNeverUsedAgainFirst) {
  // Row 9 is never used again; rows 1 and 2 are: both stay.
  EXPECT_EQ(Misses(SimulateBelady({{1, 2}, {9}, {1, 2}}, 2)), (std::vector<int64_t>{2, 1, 0}));
}

// The control: MIN never misses more than LRU, and both see the same rows.
TEST(Simulators, BeladyNeverMissesMoreThanLru) {
  const ZipfRows zipf(5000, 1.0);
  Trace trace;
  for (uint64_t b = 0; b < 60; ++b) {
    std::vector<int64_t> rows(400);
    zipf.Draw(1, b, rows, 7);
    trace.push_back(DistinctRows(rows));
  }
  for (int64_t capacity : {0, 50, 300, 1000, 6000}) {
    SimCounts lru, belady;
    const std::vector<SimCounts> l = SimulateLru(trace, capacity);
    const std::vector<SimCounts> b = SimulateBelady(trace, capacity);
    for (std::size_t t = 0; t < trace.size(); ++t) {
      EXPECT_EQ(l[t].unique, b[t].unique);
      lru += l[t];
      belady += b[t];
    }
    EXPECT_LE(belady.misses, lru.misses) << "capacity " << capacity;
    if (capacity >= 5000) {
      EXPECT_EQ(belady.misses, lru.misses);  // only compulsory misses
    }
  }
}

TEST(ZipfRows, DrawsAreReproducibleAndStreamsDiffer) {
  const ZipfRows zipf(1000, 1.2);
  std::vector<int64_t> a(100), b(100), c(100);
  zipf.Draw(5, 1, a);
  zipf.Draw(5, 1, b);
  zipf.Draw(5, 2, c);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(ZipfRows, UniformReachesEveryRow) {
  const ZipfRows zipf(10, 0.0);
  std::vector<int64_t> rows(1000);
  zipf.Draw(1, 0, rows);
  EXPECT_EQ(DistinctRows(rows), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(ZipfRows, FrequenciesFollowZipf) {
  const int64_t rows = 100;
  const ZipfRows zipf(rows, 1.0);  // salt 0: rank k is row k * 2654435761 mod 100
  std::vector<int64_t> draws(400'000);
  zipf.Draw(2, 0, draws);
  std::vector<int64_t> hist(rows, 0);
  for (int64_t row : draws) ++hist[row];
  for (int64_t k : {0, 1, 9, 99}) {
    const int64_t row = static_cast<int64_t>((uint64_t(k) * 2654435761u) % rows);
    const double expected = zipf.RankProbability(k) * double(draws.size());
    EXPECT_NEAR(double(hist[row]), expected, 5 * std::sqrt(expected) + 1) << "rank " << k;
  }
}

}  // namespace
}  // namespace ember::bench::cache_bench
