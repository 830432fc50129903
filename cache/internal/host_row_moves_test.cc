// MoveRowsOnHost and HostCopyThreads (white-box tests of internals, beside
// them): the host's half of a mapped home's copy-engine fills, against a
// copy row by row on fresh random data.

#include "cache/internal/host_row_moves.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "cache/internal/cache_rows.h"
#include "cache/internal/host_copy_threads.h"

namespace ember::cache::internal {
namespace {

TEST(HostCopyThreadsTest, EveryPartRunsOnceARun) {
  for (int threads : {1, 2, 5}) {
    HostCopyThreads pool(threads);
    ASSERT_EQ(pool.parts(), threads);
    for (int run = 0; run < 50; ++run) {
      std::vector<std::atomic<int>> calls(threads);
      pool.Run([&](int part, int parts) {
        EXPECT_EQ(parts, threads);
        calls[part].fetch_add(1);
      });
      for (int p = 0; p < threads; ++p) EXPECT_EQ(calls[p].load(), 1) << "part " << p;
    }
  }
}

TEST(HostCopyThreadsTest, FewerThanOneThreadIsTheCallerAlone) {
  HostCopyThreads pool(0);
  EXPECT_EQ(pool.parts(), 1);
  int calls = 0;
  pool.Run([&](int part, int parts) { calls += part == 0 && parts == 1; });
  EXPECT_EQ(calls, 1);
}

// Three f32 tables of other dims (slots of the largest), as TbeTables lays
// them out, and a prefetch's lists drawn at random: evicted and new rows
// disjoint, in home order, staging rows in any order.
struct Case {
  std::vector<int64_t> rows{50, 7, 120};
  std::vector<int64_t> dims{8, 3, 16};
  std::vector<int64_t> row_offsets, weight_offsets;
  std::vector<float> home;
  CacheArgs cache;
  int64_t slot_bytes = 16 * 4;

  Case() {
    row_offsets = {0};
    weight_offsets = {0};
    for (std::size_t t = 0; t < rows.size(); ++t) {
      row_offsets.push_back(row_offsets.back() + rows[t]);
      weight_offsets.push_back(weight_offsets.back() + rows[t] * dims[t]);
    }
    home.resize(weight_offsets.back());
    cache.num_tables = static_cast<int>(rows.size());
    cache.rows = rows.data();
    cache.dims = dims.data();
    cache.row_offsets = row_offsets.data();
    cache.weight_offsets = weight_offsets.data();
    cache.total_rows = row_offsets.back();
    cache.slot_dim = 16;
    cache.home = home.data();
  }
  const float* HomeRow(int64_t row) const {
    const int table = TableOf(cache, row);
    return home.data() + weight_offsets[table] + (row - row_offsets[table]) * dims[table];
  }
  int64_t Dim(int64_t row) const { return dims[TableOf(cache, row)]; }
};

TEST(HostRowMovesTest, EvictedRowsGoHomeAndNewRowsAreGathered) {
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<float> value(-1, 1);
  for (int threads : {1, 3, 4}) {
    Case c;
    for (float& v : c.home) v = value(rng);
    const std::vector<float> before = c.home;
    std::vector<int64_t> ids(c.cache.total_rows);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    const int64_t staged = 40;
    const int64_t fills = 60;
    std::vector<int64_t> staged_rows(ids.begin(), ids.begin() + staged);
    std::vector<int64_t> fill_rows(ids.begin() + staged, ids.begin() + staged + fills);
    std::sort(staged_rows.begin(), staged_rows.end());
    std::sort(fill_rows.begin(), fill_rows.end());
    std::vector<uint32_t> staged_at(staged);
    std::iota(staged_at.begin(), staged_at.end(), 0u);
    std::shuffle(staged_at.begin(), staged_at.end(), rng);
    const int64_t slot_floats = c.slot_bytes / 4;
    std::vector<float> staged_data(staged * slot_floats);
    for (float& v : staged_data) v = value(rng);
    std::vector<float> fill_data(fills * slot_floats, 7.0f);

    HostRowMoves moves;
    moves.slot_bytes = c.slot_bytes;
    moves.staged_rows = staged_rows.data();
    moves.staged_at = staged_at.data();
    moves.staged = staged;
    moves.staged_data = reinterpret_cast<const char*>(staged_data.data());
    moves.fill_rows = fill_rows.data();
    moves.fills = fills;
    moves.fill_data = reinterpret_cast<char*>(fill_data.data());
    HostCopyThreads pool(threads);
    MoveRowsOnHost(c.cache, moves, pool);

    std::vector<float> expected = before;
    for (int64_t i = 0; i < staged; ++i) {
      const int64_t row = staged_rows[i];
      const float* from = staged_data.data() + staged_at[i] * slot_floats;
      const int64_t at = c.HomeRow(row) - c.home.data();
      std::copy(from, from + c.Dim(row), expected.begin() + at);
    }
    EXPECT_EQ(c.home, expected) << threads << " threads: home after the write-backs";
    for (int64_t i = 0; i < fills; ++i) {
      const int64_t row = fill_rows[i];
      const float* got = fill_data.data() + i * slot_floats;
      const float* home_row = c.HomeRow(row);
      for (int64_t e = 0; e < slot_floats; ++e) {
        // The row's own elements from home; the slot's rest untouched.
        const float want = e < c.Dim(row) ? home_row[e] : 7.0f;
        ASSERT_EQ(got[e], want) << threads << " threads, fill " << i << " (row " << row
                                << "), element " << e;
      }
    }
  }
}

TEST(HostRowMovesTest, NothingToMoveTouchesNothing) {
  Case c;
  std::fill(c.home.begin(), c.home.end(), 3.0f);
  HostRowMoves moves;
  moves.slot_bytes = c.slot_bytes;
  HostCopyThreads pool(4);
  MoveRowsOnHost(c.cache, moves, pool);
  EXPECT_TRUE(std::all_of(c.home.begin(), c.home.end(), [](float v) { return v == 3.0f; }));
}

}  // namespace
}  // namespace ember::cache::internal
