// MoveRowsOnHost, the pinned layout and HostCopyThreads (white-box tests
// of internals, beside them): the host's half of a mapped home's
// copy-engine fills, against a copy row by row on fresh random data.

#include "cache/internal/host_row_moves.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "cache/internal/cache_rows.h"
#include "cache/internal/host_copy_threads.h"

namespace ember::cache::internal {
namespace {

TEST(HostCopyThreadsTest, EveryPartRunsOnceARun) {
  for (int threads : {1, 2, 5}) {
    HostCopyThreads pool(threads);
    const int parts = pool.parts();
    ASSERT_GE(parts, threads);
    for (int run = 0; run < 50; ++run) {
      std::vector<std::atomic<int>> calls(parts);
      pool.Run([&](int part, int of) {
        EXPECT_EQ(of, parts);
        calls[part].fetch_add(1);
      });
      for (int p = 0; p < parts; ++p) EXPECT_EQ(calls[p].load(), 1) << "part " << p;
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

// The thread holds its first part until every other part has returned:
// the caller must take them all. Were parts dealt to threads in advance,
// the held thread's others would never run (the wait gives up after 10 s
// and the test fails).
TEST(HostCopyThreadsTest, AThreadHeldInAPartLeavesTheOtherPartsToTheCaller) {
  HostCopyThreads pool(2);
  ASSERT_GT(pool.parts(), 2) << "more parts than threads";
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int> returned{0};
  std::atomic<bool> held{false};
  bool others_returned = false;  // by the held part, read after Run
  const auto wait_until = [](auto done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    return done();
  };
  pool.Run([&](int, int parts) {
    if (std::this_thread::get_id() == caller) {
      wait_until([&] { return held.load(); });  // the thread has claimed a part
    } else if (!held.exchange(true)) {
      others_returned = wait_until([&] { return returned.load() == parts - 1; });
    }
    returned.fetch_add(1);
  });
  EXPECT_TRUE(held.load()) << "the thread claimed no part in 10 s";
  EXPECT_TRUE(others_returned) << "the parts left were not taken by the caller";
  EXPECT_EQ(returned.load(), pool.parts());
}

// Three f32 tables of other dims (slots of the largest), as TbeTables lays
// them out; a prefetch's new rows are drawn at random, in home order.
struct Case {
  std::vector<int64_t> rows{50, 7, 120};
  std::vector<int64_t> dims{8, 3, 16};
  std::vector<int64_t> row_offsets, weight_offsets;
  std::vector<float> home;
  CacheArgs cache;  // f32 slots of 16 elements

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

TEST(HostRowMovesTest, NewRowsAreGatheredFromHome) {
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<float> value(-1, 1);
  for (int threads : {1, 3, 4}) {
    Case c;
    for (float& v : c.home) v = value(rng);
    const std::vector<float> before = c.home;
    std::vector<int64_t> ids(c.cache.total_rows);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    const int64_t fills = 60;
    std::vector<int64_t> fill_rows(ids.begin(), ids.begin() + fills);
    std::sort(fill_rows.begin(), fill_rows.end());
    const int64_t slot_floats = SlotBytes(c.cache) / 4;
    std::vector<float> fill_data(fills * slot_floats, 7.0f);

    HostFillBuffers buffers;
    buffers.fill_rows = fill_rows.data();
    buffers.fill_data = reinterpret_cast<char*>(fill_data.data());
    HostCopyThreads pool(threads);
    MoveRowsOnHost(c.cache, buffers, fills, pool);

    EXPECT_EQ(c.home, before) << threads << " threads: home unchanged";
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

// The pinned pieces, for staging rows of every row type: aligned, in
// order, apart, and within HostFillBytes.
TEST(HostRowMovesTest, ThePinnedPiecesFitAndDoNotOverlap) {
  for (const RowType type : {RowType::kF32, RowType::kF16, RowType::kBF16}) {
    for (const int64_t rows : {int64_t{1}, int64_t{7}, int64_t{1000}}) {
      Case c;
      c.cache.row_type = type;
      c.cache.staging_capacity = rows;
      std::vector<char> pinned(HostFillBytes(c.cache));
      HostFills fills;
      fills.cache = c.cache;
      fills.pinned = pinned.data();
      const HostFillBuffers b = CarveHostFills(fills);
      const char* const base = pinned.data();
      const auto at = [&](const void* p) { return static_cast<const char*>(p) - base; };
      EXPECT_EQ(at(b.header), 0);
      EXPECT_GE(at(b.fill_rows), kHostFillHeaderBytes);
      EXPECT_GE(at(b.fill_data), at(b.fill_rows) + rows * 8);
      EXPECT_LE(at(b.fill_data) + rows * SlotBytes(c.cache), HostFillBytes(c.cache));
      EXPECT_EQ(at(b.fill_rows) % 16, 0);
      EXPECT_EQ(at(b.fill_data) % 16, 0);
    }
  }
}

// No new rows: neither home nor the pinned rows change, though the list
// names rows (a stale list from an earlier prefetch).
TEST(HostRowMovesTest, NothingToMoveTouchesNothing) {
  Case c;
  std::fill(c.home.begin(), c.home.end(), 3.0f);
  std::vector<int64_t> fill_rows = {0, 1, 2, 3};
  std::vector<float> fill_data(fill_rows.size() * SlotBytes(c.cache) / 4, 7.0f);
  HostFillBuffers buffers;
  buffers.fill_rows = fill_rows.data();
  buffers.fill_data = reinterpret_cast<char*>(fill_data.data());
  HostCopyThreads pool(4);
  MoveRowsOnHost(c.cache, buffers, 0, pool);
  EXPECT_TRUE(std::all_of(c.home.begin(), c.home.end(), [](float v) { return v == 3.0f; }));
  EXPECT_TRUE(std::all_of(fill_data.begin(), fill_data.end(), [](float v) { return v == 7.0f; }))
      << "a row was gathered";
}

}  // namespace
}  // namespace ember::cache::internal
