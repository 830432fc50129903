// The cache's state under prefetch, relookup, warm, flush and reset, on the
// CPU and every engine type: lock counts follow the batches in flight,
// locked slots are never evicted, conflict misses stay at home, a bad batch
// changes nothing, and statistics count what happened.

#include <algorithm>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cache/cached_tbe.h"
#include "engine/error.h"
#include "ops/elementwise.h"
#include "tests/cache/cache_test_util.h"
#include "tests/engine/engine_cases.h"

namespace ember::cache::testing {
namespace {

using engine::testing::AllEngineCases;
using engine::testing::CaseName;
using engine::testing::EngineTest;
using ::testing::HasSubstr;

constexpr int kWays = 32;

class CacheStateTest : public EngineTest {
 protected:
  // Two tables of 100 rows (dims 4 and 8) and a cache of `sets` sets.
  std::unique_ptr<CachedTbe> MakeCache(int64_t sets, CachePolicy policy = CachePolicy::kLru,
                                       int passes = 1,
                                       WriteBack write_back = WriteBack::kEveryRow) {
    CacheOptions options;
    options.policy = policy;
    options.prefetch_passes = passes;
    options.write_back = write_back;
    options.load_factor = static_cast<double>(sets * kWays) / 200.0;
    auto cache = std::make_unique<CachedTbe>(engine(), ops::TbeTables({100, 100}, {4, 8}), options);
    ops::RandomUniform(cache->home(), 7, -1.0f, 1.0f);
    return cache;
  }
  // A batch of batch size 1: table 0's bag holds `rows0`, table 1's `rows1`.
  Batch OneBag(const std::vector<int64_t>& rows0, const std::vector<int64_t>& rows1 = {}) {
    return MakeBatch(engine(), engine::Context::CPU(), 2, 1, {rows0, rows1});
  }
  // Prefetches and relooks up `batch` `times` times: its rows' uses, each
  // step a timestep (LFU's counts grow by the batch's indices each time).
  static void UseTimes(CachedTbe& cache, CacheLocations& where, const Batch& batch, int times) {
    for (int i = 0; i < times; ++i) {
      cache.Prefetch(batch.view(), where);
      cache.Relookup(batch.view(), where);
    }
  }
  // Locations read back: one slot (or -1) per index.
  std::vector<int32_t> SlotsOf(const CacheLocations& where, int64_t n) {
    const std::vector<int32_t> all = ToHost<int32_t>(where.tensor());
    return std::vector<int32_t>(all.begin(), all.begin() + n);
  }
  static std::vector<int64_t> Range(int64_t begin, int64_t end) {
    std::vector<int64_t> rows(static_cast<std::size_t>(end - begin));
    std::iota(rows.begin(), rows.end(), begin);
    return rows;
  }
  // Slots with a nonzero lock, with their counts.
  static std::map<int64_t, int32_t> Locked(const CacheSnapshot& snapshot) {
    std::map<int64_t, int32_t> locked;
    for (std::size_t s = 0; s < snapshot.locks.size(); ++s) {
      if (snapshot.locks[s] != 0) locked[static_cast<int64_t>(s)] = snapshot.locks[s];
    }
    return locked;
  }
};

TEST_P(CacheStateTest, LocationsNameSlotsHoldingTheRowsAndMissesReadHome) {
  auto cache = MakeCache(4);
  Batch batch = OneBag({5, 7, 5, 99}, {3});  // table 1's row 3 is linear id 103
  CacheLocations where = cache->NewLocations(5);
  cache->Prefetch(batch.view(), where);
  const std::vector<int32_t> slots = SlotsOf(where, 5);
  const CacheSnapshot snapshot = cache->Snapshot();
  const std::vector<int64_t> linear = {5, 7, 5, 99, 103};
  for (int k = 0; k < 5; ++k) {
    ASSERT_GE(slots[k], 0) << "index " << k << " missed a cache with room";
    EXPECT_EQ(snapshot.tags[slots[k]], linear[k]);
  }
  EXPECT_EQ(slots[0], slots[2]) << "one row, one slot";
  cache->Relookup(batch.view(), where);
  engine().WaitForAll();
}

TEST_P(CacheStateTest, LockCountsFollowTheBatchesInFlight) {
  auto cache = MakeCache(4);
  Batch first = OneBag({1, 2, 2, 3});
  Batch second = OneBag({3, 4}, {0});
  CacheLocations a = cache->NewLocations(8);
  CacheLocations b = cache->NewLocations(8);
  cache->Prefetch(first.view(), a);
  cache->Prefetch(second.view(), b);
  const CacheSnapshot both = cache->Snapshot();
  auto lock_of = [&](const CacheSnapshot& s, int64_t row) {
    const auto at = std::find(s.tags.begin(), s.tags.end(), row);
    return at == s.tags.end() ? -1 : s.locks[at - s.tags.begin()];
  };
  EXPECT_EQ(lock_of(both, 1), 1);
  EXPECT_EQ(lock_of(both, 2), 1) << "a row twice in a batch is locked once";
  EXPECT_EQ(lock_of(both, 3), 2) << "both batches in flight use row 3";
  EXPECT_EQ(lock_of(both, 4), 1);
  EXPECT_EQ(lock_of(both, 100), 1);
  EXPECT_EQ(cache->batches_in_flight(), 2);
  cache->Relookup(first.view(), a);
  const CacheSnapshot one = cache->Snapshot();
  EXPECT_EQ(lock_of(one, 1), 0);
  EXPECT_EQ(lock_of(one, 3), 1);
  cache->Relookup(second.view(), b);
  EXPECT_TRUE(Locked(cache->Snapshot()).empty()) << "every lock released";
  EXPECT_EQ(cache->batches_in_flight(), 0);
}

TEST_P(CacheStateTest, OneSetForcesConflictMissesThatStayAtHome) {
  auto cache = MakeCache(1);
  ASSERT_EQ(cache->num_slots(), kWays);
  Batch batch = OneBag(Range(0, 40));  // 40 distinct rows for 32 ways
  CacheLocations where = cache->NewLocations(40);
  cache->Prefetch(batch.view(), where);
  const std::vector<int32_t> slots = SlotsOf(where, 40);
  EXPECT_EQ(std::count(slots.begin(), slots.end(), -1), 8);
  const CacheStats stats = cache->LastStepStats();
  EXPECT_EQ(stats.all.requested, 40);
  EXPECT_EQ(stats.all.unique, 40);
  EXPECT_EQ(stats.all.unique_misses, 40);
  EXPECT_EQ(stats.all.inserted, 32);
  EXPECT_EQ(stats.all.unique_conflict_misses, 8);
  EXPECT_EQ(stats.all.conflict_miss_indices, 8) << "no row twice";
  EXPECT_EQ(stats.all.evicted, 0);
  EXPECT_EQ(stats.all.bytes_to_cache, 32 * 4 * 4);
  EXPECT_EQ(stats.tables[0].inserted, 32);
  EXPECT_EQ(stats.tables[1].requested, 0);
  // Misses of a set go in in increasing row order: rows 0..31 get the ways.
  for (int k = 0; k < 40; ++k) EXPECT_EQ(slots[k] >= 0, k < 32) << "row " << k;
  cache->Relookup(batch.view(), where);
  engine().WaitForAll();
}

TEST_P(CacheStateTest, LockedSlotsAreNotEvicted) {
  auto cache = MakeCache(1);
  Batch held = OneBag(Range(0, 32));
  Batch other = OneBag(Range(50, 82));
  CacheLocations a = cache->NewLocations(32);
  CacheLocations b = cache->NewLocations(32);
  cache->Prefetch(held.view(), a);
  const CacheSnapshot before = cache->Snapshot();
  cache->Prefetch(other.view(), b);  // every way is locked by the first batch
  const CacheSnapshot after = cache->Snapshot();
  EXPECT_EQ(after.tags, before.tags);
  EXPECT_EQ(cache->LastStepStats().all.unique_conflict_misses, 32);
  EXPECT_EQ(cache->LastStepStats().all.conflict_miss_indices, 32);
  cache->Relookup(held.view(), a);
  cache->Relookup(other.view(), b);
  // With the locks gone, the next prefetch evicts the least recently used.
  Batch third = OneBag({90});
  CacheLocations c = cache->NewLocations(1);
  cache->Prefetch(third.view(), c);
  const CacheStats stats = cache->LastStepStats();
  EXPECT_EQ(stats.all.inserted, 1);
  EXPECT_EQ(stats.all.evicted, 1);
  EXPECT_EQ(stats.all.bytes_to_home, 4 * 4) << "every evicted row goes home by default";
  cache->Relookup(third.view(), c);
  engine().WaitForAll();
}

// Batch size 1, dims 4 + 8: a gradient of 1 on table 0's bag, which SGD
// at rate 1 takes off each of its rows.
Tensor GradOfOnesOnTable0(engine::Engine& engine) {
  std::vector<float> ones(12, 0.0f);
  std::fill(ones.begin(), ones.begin() + 4, 1.0f);
  return FromHost(engine, engine::Context::CPU(), ones, {1, 12});
}

bool AllClean(const CacheSnapshot& snapshot) {
  return std::all_of(snapshot.dirty.begin(), snapshot.dirty.end(),
                     [](int32_t flag) { return flag == 0; });
}

// A flush writes the trained rows home and the cache stays valid; a row no
// backward changed since the flush goes home again by default (FBGEMM's
// flush) and not under WriteBack::kDirtyRows, as a value put in its slot
// behind the cache's back shows.
TEST_P(CacheStateTest, FlushWritesBackTheTrainedRowsAndTheCacheStaysValid) {
  for (const WriteBack write_back : {WriteBack::kEveryRow, WriteBack::kDirtyRows}) {
    SCOPED_TRACE(write_back == WriteBack::kEveryRow ? "every row" : "dirty rows");
    auto cache = MakeCache(1, CachePolicy::kLru, 1, write_back);
    Batch batch = OneBag({2, 3});
    CacheLocations where = cache->NewLocations(2);
    cache->Prefetch(batch.view(), where);
    cache->Relookup(batch.view(), where);
    const std::vector<float> start = ToHost<float>(cache->home());
    const std::vector<int32_t> slot = SlotsOf(where, 2);
    ASSERT_GE(slot[0], 0);
    ASSERT_GE(slot[1], 0);
    cache->BackwardSgd(batch.view(), where, GradOfOnesOnTable0(engine()), {.learning_rate = 1.0f});
    CacheSnapshot snapshot = cache->Snapshot();
    EXPECT_EQ(snapshot.dirty[slot[0]], 1);
    EXPECT_EQ(snapshot.dirty[slot[1]], 1);
    EXPECT_EQ(std::count(snapshot.dirty.begin(), snapshot.dirty.end(), 1), 2);
    EXPECT_EQ(ToHost<float>(cache->home()), start) << "the update is in the slots";
    cache->Flush();
    std::vector<float> home = ToHost<float>(cache->home());
    for (int c = 0; c < 8; ++c) EXPECT_EQ(home[2 * 4 + c], start[2 * 4 + c] - 1.0f) << c;
    EXPECT_TRUE(AllClean(cache->Snapshot()));
    float* cached = cache->slots().data<float>() + slot[0] * cache->slot_dim();
    cached[0] = 1000.0f;
    cache->Flush();
    home = ToHost<float>(cache->home());
    EXPECT_EQ(home[8], write_back == WriteBack::kEveryRow ? 1000.0f : start[8] - 1.0f)
        << "row 2, value 0";
    // The cache stays valid after a flush: the rows are still hits.
    cache->Prefetch(batch.view(), where);
    EXPECT_EQ(cache->LastStepStats().all.unique_misses, 0);
    cache->Relookup(batch.view(), where);
    engine().WaitForAll();
  }
}

// Evicted rows go home: all of them by default, only the trained ones
// under WriteBack::kDirtyRows. Rows 0..15 are trained, rows 16..31 only
// read; a marker put in the read rows' slots behind the cache's back
// shows which went home.
TEST_P(CacheStateTest, EvictionWritesBackEveryRowOrOnlyTheTrainedOnes) {
  for (const WriteBack write_back : {WriteBack::kEveryRow, WriteBack::kDirtyRows}) {
    const bool every_row = write_back == WriteBack::kEveryRow;
    SCOPED_TRACE(every_row ? "every row" : "dirty rows");
    auto cache = MakeCache(1, CachePolicy::kLru, 1, write_back);
    const std::vector<float> start = ToHost<float>(cache->home());
    Batch trained = OneBag(Range(0, 16));
    Batch read = OneBag(Range(16, 32));
    CacheLocations a = cache->NewLocations(16);
    CacheLocations b = cache->NewLocations(16);
    cache->Prefetch(trained.view(), a);
    cache->Relookup(trained.view(), a);
    cache->BackwardSgd(trained.view(), a, GradOfOnesOnTable0(engine()), {.learning_rate = 1.0f});
    cache->Prefetch(read.view(), b);
    cache->Relookup(read.view(), b);
    engine().WaitForAll();
    for (const int32_t slot : SlotsOf(b, 16)) {
      ASSERT_GE(slot, 0);
      cache->slots().data<float>()[slot * cache->slot_dim()] = 1000.0f;
    }
    Batch other = OneBag(Range(50, 82));  // evicts all 32
    CacheLocations c = cache->NewLocations(32);
    cache->Prefetch(other.view(), c);
    const CacheStats stats = cache->LastStepStats();
    EXPECT_EQ(stats.all.evicted, 32);
    EXPECT_EQ(stats.all.bytes_to_home, (every_row ? 32 : 16) * 4 * 4) << "rows of 4 floats";
    cache->Relookup(other.view(), c);
    const std::vector<float> home = ToHost<float>(cache->home());
    for (std::size_t row = 0; row < 32; ++row) {
      for (std::size_t col = 0; col < 4; ++col) {
        float expected = start[row * 4 + col] - (row < 16 ? 1.0f : 0.0f);
        if (every_row && row >= 16 && col == 0) expected = 1000.0f;
        EXPECT_EQ(home[row * 4 + col], expected) << row << ", " << col;
      }
    }
    EXPECT_TRUE(AllClean(cache->Snapshot())) << "filled slots are clean";
  }
}

TEST_P(CacheStateTest, MultiPassLocksLikeOnePass) {
  Batch batch = OneBag({1, 2, 3, 1, 4, 5, 2, 6, 7, 1, 8, 9}, {1, 1, 2});
  std::vector<CacheSnapshot> snapshots;
  for (int passes : {1, 6, 12}) {
    auto cache = MakeCache(4, CachePolicy::kLru, passes);
    CacheLocations where = cache->NewLocations(15);
    cache->Prefetch(batch.view(), where);
    snapshots.push_back(cache->Snapshot());
    EXPECT_EQ(cache->LastStepStats().all.unique, 11) << passes << " passes";
    cache->Relookup(batch.view(), where);
    engine().WaitForAll();
  }
  for (std::size_t i = 1; i < snapshots.size(); ++i) {
    EXPECT_EQ(snapshots[i].locks, snapshots[0].locks) << "locking is idempotent in a timestep";
    EXPECT_EQ(snapshots[i].tags, snapshots[0].tags);
  }
}

// Conflict misses count rows and, apart, their indices (FBGEMM's
// num_conflict_unique_misses and num_conflict_misses): rows 32..39 find no
// way, row 35 twice.
TEST_P(CacheStateTest, ConflictMissesCountRowsAndTheirIndices) {
  auto cache = MakeCache(1);
  std::vector<int64_t> rows = Range(0, 40);
  rows.push_back(35);
  Batch batch = OneBag(rows);
  CacheLocations where = cache->NewLocations(41);
  cache->Prefetch(batch.view(), where);
  const CacheStats stats = cache->LastStepStats();
  EXPECT_EQ(stats.all.requested, 41);
  EXPECT_EQ(stats.all.inserted, 32);
  EXPECT_EQ(stats.all.unique_conflict_misses, 8);
  EXPECT_EQ(stats.all.conflict_miss_indices, 9) << "row 35's two indices";
  EXPECT_EQ(stats.tables[0].conflict_miss_indices, 9);
  EXPECT_EQ(stats.tables[1].conflict_miss_indices, 0);
  const std::vector<int32_t> slots = SlotsOf(where, 41);
  EXPECT_EQ(std::count(slots.begin(), slots.end(), -1), 9) << "each read at home";
  cache->Relookup(batch.view(), where);
  engine().WaitForAll();
}

// LFU, as FBGEMM's: each prefetch adds every index of its batch to its
// row's count, hit or miss, once in all over a multi-pass prefetch's passes.
TEST_P(CacheStateTest, LfuCountsEveryIndex) {
  for (const int passes : {1, 3}) {
    SCOPED_TRACE(std::to_string(passes) + " passes");
    auto cache = MakeCache(4, CachePolicy::kLfu, passes);
    Batch first = OneBag({5, 7, 5, 5, 9, 5}, {3, 3});
    Batch second = OneBag({5, 9}, {3});  // hits now
    CacheLocations where = cache->NewLocations(8);
    cache->Prefetch(first.view(), where);
    cache->Relookup(first.view(), where);
    std::vector<int64_t> counts = ToHost<int64_t>(cache->lfu_counts());
    EXPECT_EQ(counts[5], 4) << "a row four times in a batch";
    EXPECT_EQ(counts[7], 1);
    EXPECT_EQ(counts[9], 1);
    EXPECT_EQ(counts[103], 2) << "table 1's row 3";
    EXPECT_EQ(cache->LastStepStats().all.unique, 4);
    cache->Prefetch(second.view(), where);
    cache->Relookup(second.view(), where);
    EXPECT_EQ(cache->LastStepStats().all.unique_misses, 0);
    counts = ToHost<int64_t>(cache->lfu_counts());
    EXPECT_EQ(counts[5], 5);
    EXPECT_EQ(counts[9], 2);
    EXPECT_EQ(counts[103], 3);
    EXPECT_EQ(std::accumulate(counts.begin(), counts.end(), int64_t{0}), 11) << "one per index";
  }
}

// Rows 0..31 fill the one set and are used three times each; row 40, once,
// counts less than every way: it is a conflict miss (read at home) and the
// 32 rows stay.
TEST_P(CacheStateTest, LfuRefusesARowUsedLessThanEveryWay) {
  auto cache = MakeCache(1, CachePolicy::kLfu);
  CacheLocations where = cache->NewLocations(32);
  UseTimes(*cache, where, OneBag(Range(0, 32)), 3);
  const CacheSnapshot before = cache->Snapshot();
  Batch cold = OneBag({40});
  cache->Prefetch(cold.view(), where);
  EXPECT_EQ(SlotsOf(where, 1), std::vector<int32_t>{-1});
  const CacheStats stats = cache->LastStepStats();
  EXPECT_EQ(stats.all.unique_misses, 1);
  EXPECT_EQ(stats.all.inserted, 0);
  EXPECT_EQ(stats.all.evicted, 0);
  EXPECT_EQ(stats.all.unique_conflict_misses, 1);
  EXPECT_EQ(stats.all.conflict_miss_indices, 1);
  cache->Relookup(cold.view(), where);
  const CacheSnapshot after = cache->Snapshot();
  EXPECT_EQ(after.tags, before.tags) << "all 32 rows stay";
  EXPECT_EQ(ToHost<int64_t>(cache->lfu_counts())[40], 1) << "a refused row still counts";
}

// A row used more often than a way's row takes it: row 40 four times in one
// batch (count 4) against rows 0..31 of count 3, all last used together:
// the lowest way (row 0's) goes.
TEST_P(CacheStateTest, LfuAdmitsARowUsedMoreThanTheVictim) {
  auto cache = MakeCache(1, CachePolicy::kLfu);
  CacheLocations where = cache->NewLocations(32);
  UseTimes(*cache, where, OneBag(Range(0, 32)), 3);
  Batch hot = OneBag({40, 40, 40, 40});
  cache->Prefetch(hot.view(), where);
  const std::vector<int32_t> slots = SlotsOf(where, 4);
  EXPECT_EQ(slots, std::vector<int32_t>(4, 0)) << "way 0, row 0's";
  EXPECT_EQ(cache->LastStepStats().all.inserted, 1);
  EXPECT_EQ(cache->LastStepStats().all.evicted, 1);
  EXPECT_EQ(cache->LastStepStats().all.unique_conflict_misses, 0);
  cache->Relookup(hot.view(), where);
  const CacheSnapshot snapshot = cache->Snapshot();
  EXPECT_EQ(snapshot.tags[0], 40);
  EXPECT_EQ(std::count(snapshot.tags.begin(), snapshot.tags.end(), 0), 0) << "row 0 evicted";
}

// Ties: a candidate whose count equals the victim's is admitted (FBGEMM
// refuses only a victim counting more), and candidates of equal count are
// offered ways in increasing row id, whatever their order in the batch.
TEST_P(CacheStateTest, LfuTiesAdmitAndGoByRowId) {
  auto cache = MakeCache(1, CachePolicy::kLfu);
  CacheLocations where = cache->NewLocations(32);
  // Rows 0..30 count 3, row 31 count 2 (way 31).
  for (int i = 0; i < 3; ++i) {
    Batch batch = OneBag(Range(0, i == 0 ? 32 : 31));
    cache->Prefetch(batch.view(), where);
    cache->Relookup(batch.view(), where);
  }
  Batch again = OneBag({31});
  cache->Prefetch(again.view(), where);
  cache->Relookup(again.view(), where);
  ASSERT_EQ(ToHost<int64_t>(cache->lfu_counts())[31], 2);
  // Rows 41 and 40 twice each (count 2): row 40 ties row 31 and takes its
  // way; row 41 is offered the next victim (count 3) and refused.
  Batch pair = OneBag({41, 41, 40, 40});
  cache->Prefetch(pair.view(), where);
  EXPECT_EQ(SlotsOf(where, 4), (std::vector<int32_t>{-1, -1, 31, 31}));
  const CacheStats stats = cache->LastStepStats();
  EXPECT_EQ(stats.all.inserted, 1);
  EXPECT_EQ(stats.all.unique_conflict_misses, 1);
  EXPECT_EQ(stats.all.conflict_miss_indices, 2);
  cache->Relookup(pair.view(), where);
  engine().WaitForAll();
}

// Every way's row used more often than any candidate: none is admitted, and
// the conflict misses count the rows and their indices (row 35 twice).
TEST_P(CacheStateTest, LfuConflictMissesOfAFullHotSetCountRowsAndIndices) {
  auto cache = MakeCache(1, CachePolicy::kLfu);
  CacheLocations where = cache->NewLocations(41);
  UseTimes(*cache, where, OneBag({}, Range(0, 32)), 3);  // table 1's rows: linear 100..131
  std::vector<int64_t> rows = Range(0, 40);
  rows.push_back(35);
  Batch cold = OneBag(rows);
  cache->Prefetch(cold.view(), where);
  const CacheStats stats = cache->LastStepStats();
  EXPECT_EQ(stats.all.unique_misses, 40);
  EXPECT_EQ(stats.all.inserted, 0);
  EXPECT_EQ(stats.all.unique_conflict_misses, 40);
  EXPECT_EQ(stats.all.conflict_miss_indices, 41);
  EXPECT_EQ(stats.tables[0].conflict_miss_indices, 41);
  cache->Relookup(cold.view(), where);
  EXPECT_EQ(ToHost<int64_t>(cache->lfu_counts())[35], 2);
}

// In a multi-pass prefetch a row that one pass refuses may be admitted by a
// later pass (its count grew): every index then names its slot, as a
// backward of the batch before (relooked up after this prefetch) updates
// the slot, and none is a conflict miss's index. Rows 0..31 count 3; row
// 40 comes four times in two passes: count 2 (refused), then 4 (admitted).
TEST_P(CacheStateTest, LfuRowAdmittedByALaterPassGivesEveryIndexItsSlot) {
  auto cache = MakeCache(1, CachePolicy::kLfu, /*passes=*/2);
  CacheLocations where = cache->NewLocations(32);
  UseTimes(*cache, where, OneBag(Range(0, 32)), 3);
  Batch hot = OneBag({40, 40, 40, 40});
  cache->Prefetch(hot.view(), where);
  const std::vector<int32_t> slots = SlotsOf(where, 4);
  EXPECT_EQ(slots, std::vector<int32_t>(4, 0)) << "way 0 (row 0's), for both passes' indices";
  const CacheStats stats = cache->LastStepStats();
  EXPECT_EQ(stats.all.unique_misses, 2) << "a miss in each pass";
  EXPECT_EQ(stats.all.unique_conflict_misses, 1) << "the first pass left it at home";
  EXPECT_EQ(stats.all.inserted, 1);
  EXPECT_EQ(stats.all.conflict_miss_indices, 0) << "no index is left at home";
  EXPECT_EQ(Locked(cache->Snapshot()), (std::map<int64_t, int32_t>{{0, 1}}));
  cache->Relookup(hot.view(), where);
  EXPECT_EQ(ToHost<int64_t>(cache->lfu_counts())[40], 4);
}

// Reset zeroes the counts (FBGEMM's reset_cache_states): after it a row
// once hot counts from zero, and a new row takes a way over it again.
TEST_P(CacheStateTest, ResetZeroesLfuCounts) {
  auto cache = MakeCache(1, CachePolicy::kLfu);
  CacheLocations where = cache->NewLocations(32);
  UseTimes(*cache, where, OneBag(Range(0, 32)), 3);
  cache->Reset();
  const std::vector<int64_t> counts = ToHost<int64_t>(cache->lfu_counts());
  EXPECT_TRUE(std::all_of(counts.begin(), counts.end(), [](int64_t c) { return c == 0; }));
  Batch batch = OneBag(Range(0, 32));
  cache->Prefetch(batch.view(), where);
  cache->Relookup(batch.view(), where);
  Batch cold = OneBag({40});
  cache->Prefetch(cold.view(), where);
  EXPECT_EQ(cache->LastStepStats().all.inserted, 1) << "a tie with the rows' count of 1";
  cache->Relookup(cold.view(), where);
  EXPECT_TRUE(MakeCache(1)->lfu_counts().numel() == 0) << "LRU keeps no counts";
}

// Still LFU's order with FBGEMM's admission: row 40 (count 1) ties row 31
// (count 1, every other row counts 4) and is admitted over it.
TEST_P(CacheStateTest, LfuEvictsTheLeastUsedRow) {
  auto cache = MakeCache(1, CachePolicy::kLfu);
  CacheLocations where = cache->NewLocations(64);
  // Rows 0..31 fill the set; rows 0..30 are used three more times, row 31 not.
  std::vector<Batch> batches;
  batches.push_back(OneBag(Range(0, 32)));
  for (int i = 0; i < 3; ++i) batches.push_back(OneBag(Range(0, 31)));
  batches.push_back(OneBag({40}));
  for (Batch& batch : batches) {
    cache->Prefetch(batch.view(), where);
    cache->Relookup(batch.view(), where);
  }
  const CacheSnapshot snapshot = cache->Snapshot();
  EXPECT_EQ(std::count(snapshot.tags.begin(), snapshot.tags.end(), 31), 0) << "row 31 evicted";
  EXPECT_EQ(std::count(snapshot.tags.begin(), snapshot.tags.end(), 40), 1);
}

TEST_P(CacheStateTest, WarmFillsFreeWaysAndResetEmptiesTheCache) {
  auto cache = MakeCache(2);
  const std::vector<int64_t> hot = {3, 150, 3, 42};
  cache->Warm(hot);
  CacheSnapshot snapshot = cache->Snapshot();
  for (int64_t row : {3, 150, 42}) {
    EXPECT_EQ(std::count(snapshot.tags.begin(), snapshot.tags.end(), row), 1) << row;
  }
  Batch batch = OneBag({3}, {50});  // linear 150
  CacheLocations where = cache->NewLocations(2);
  cache->Prefetch(batch.view(), where);
  EXPECT_EQ(cache->LastStepStats().all.unique_misses, 0) << "warmed rows are hits";
  EXPECT_THROW(cache->Reset(), UsageError) << "a batch is in flight";
  cache->Relookup(batch.view(), where);
  cache->Reset();
  snapshot = cache->Snapshot();
  EXPECT_TRUE(std::all_of(snapshot.tags.begin(), snapshot.tags.end(),
                          [](int64_t tag) { return tag == -1; }));
  EXPECT_THROW(cache->Warm(std::vector<int64_t>{200}), InvalidArgument);
}

// Statistics observe only: turned off, the cache does the same and its
// statistics read zero.
TEST_P(CacheStateTest, StatisticsOffChangeNothing) {
  std::vector<CacheSnapshot> snapshots;
  for (bool stats : {true, false}) {
    CacheOptions options;
    options.collect_stats = stats;
    options.load_factor = 32.0 / 200.0;
    CachedTbe cache(engine(), ops::TbeTables({100, 100}, {4, 8}), options);
    Batch batch = OneBag(Range(0, 40), {1, 2});
    CacheLocations where = cache.NewLocations(42);
    cache.Prefetch(batch.view(), where);
    cache.Relookup(batch.view(), where);
    snapshots.push_back(cache.Snapshot());
    EXPECT_EQ(cache.TotalStats().all.requested, stats ? 42 : 0);
  }
  EXPECT_EQ(snapshots[0].tags, snapshots[1].tags);
  EXPECT_EQ(snapshots[0].timestamps, snapshots[1].timestamps);
}

TEST_P(CacheStateTest, ABadIndexNamesTableBagAndValueAndChangesNothing) {
  auto cache = MakeCache(2);
  Batch good = OneBag({1, 2});
  CacheLocations where = cache->NewLocations(8);
  cache->Prefetch(good.view(), where);
  cache->Relookup(good.view(), where);
  const CacheSnapshot before = cache->Snapshot();
  const CacheStats totals = cache->TotalStats();
  Batch bad = OneBag({1}, {4, 500});
  cache->Prefetch(bad.view(), where);
  try {
    engine().WaitForVar(where.tensor().var());
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("[CachedTbe::Prefetch] table 1, bag 0: index 500 is out of "
                                    "range [0, 100) (indices[2])"));
  }
  const CacheSnapshot after = cache->Snapshot();
  EXPECT_EQ(after.tags, before.tags);
  EXPECT_EQ(after.locks, before.locks);
  EXPECT_EQ(after.timestamps, before.timestamps);
  EXPECT_EQ(cache->TotalStats().all.requested, totals.all.requested);
}

TEST_P(CacheStateTest, NegativeSizesAreRefused) {
  for (const int field : {0, 1, 2}) {
    CacheOptions options;
    (field == 0   ? options.cache_bytes
     : field == 1 ? options.prefetch_temp_bytes
                  : options.staging_bytes) = -1;
    try {
      CachedTbe cache(engine(), ops::TbeTables({100}, {4}), options);
      ADD_FAILURE() << "no error for field " << field;
    } catch (const InvalidArgument& e) {
      EXPECT_THAT(e.what(), HasSubstr("must not be negative")) << e.what();
      EXPECT_THAT(e.what(), HasSubstr("-1")) << e.what();
    }
  }
}

TEST_P(CacheStateTest, NegativeLinkWarpsAreRefused) {
  CacheOptions options;
  options.link_warps = -8;
  try {
    CachedTbe cache(engine(), ops::TbeTables({100}, {4}), options);
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("[CachedTbe] link_warps -8 must not be negative"));
  }
}

TEST_P(CacheStateTest, FillThreadsOutOfRangeAreRefused) {
  for (const int threads : {0, -3, 65}) {
    CacheOptions options;
    options.fill_threads = threads;
    try {
      CachedTbe cache(engine(), ops::TbeTables({100}, {4}), options);
      ADD_FAILURE() << threads << ": no error";
    } catch (const InvalidArgument& e) {
      EXPECT_THAT(e.what(), HasSubstr("[CachedTbe] fill_threads " + std::to_string(threads) +
                                      " must be from 1 to 64"));
    }
  }
}

// prefetch_temp_bytes picks the fewest passes whose temporaries fit: one
// for a budget of everything, one index a pass for a budget of nothing,
// and never fewer passes for a smaller budget.
TEST_P(CacheStateTest, ATemporariesBudgetPicksTheFewestPassesThatFit) {
  constexpr int64_t kIndices = 100000;
  int last = 1;
  for (int64_t budget = int64_t{1} << 30; budget >= 1; budget /= 4) {
    CacheOptions options;
    options.prefetch_temp_bytes = budget;
    CachedTbe cache(engine(), ops::TbeTables({1000, 500}, {4, 8}), options);
    const int passes = cache.PassesFor(kIndices);
    EXPECT_GE(passes, last) << "budget " << budget;
    if (budget == int64_t{1} << 30) {
      EXPECT_EQ(passes, 1);
    }
    if (budget == 1) {
      EXPECT_EQ(passes, kIndices) << "one index a pass when nothing fits";
    }
    last = passes;
  }
  EXPECT_GT(last, 1);
}

TEST_P(CacheStateTest, BadShapesAreRefusedAtThePush) {
  auto cache = MakeCache(1);
  CacheLocations small = cache->NewLocations(1);
  Batch three_tables = MakeBatch(engine(), engine::Context::CPU(), 3, 1, {{1}, {1}, {1}});
  try {
    cache->Prefetch(three_tables.view(), small);
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("4 offsets for a cache of 2 tables and batch size 1"));
  }
  Batch big = OneBag(Range(0, small.capacity() + 1));
  EXPECT_THROW(cache->Prefetch(big.view(), small), InvalidArgument) << "locations too small";
  EXPECT_THROW(cache->Relookup(big.view(), small), InvalidArgument);
  EXPECT_EQ(cache->batches_in_flight(), 0);
}

// A load factor sizes the cache as FBGEMM does: the rows it asks for,
// truncated, then whole sets; at least one set.
TEST_P(CacheStateTest, ALoadFactorSizesTheCacheLikeFbgemm) {
  const auto sets_for = [&](int64_t rows, double load_factor) {
    CacheOptions options;
    options.load_factor = load_factor;
    return CachedTbe(engine(), ops::TbeTables({rows}, {4}), options).num_sets();
  };
  EXPECT_EQ(sets_for(3200, 0.07), 7) << "224 rows, not 224.00000000000003 rounded up";
  EXPECT_EQ(sets_for(3201, 0.07), 7) << "224.07 rows truncate to 224: 7 whole sets";
  EXPECT_EQ(sets_for(3200, 0.075), 8) << "240 rows: 7.5 sets, rounded up";
  EXPECT_EQ(sets_for(100, 0.001), 1) << "at least one set";
}

// CacheSlotsFor tells a caller the size a cache would take, for a load
// factor or a byte budget, without making one.
TEST_P(CacheStateTest, CacheSlotsForIsTheSizeTheCacheTakes) {
  const ops::TbeTables tables({3200, 700}, {4, 12});
  for (const auto& [load_factor, budget] :
       {std::pair{0.07, int64_t{0}}, std::pair{0.5, int64_t{0}},
        std::pair{0.2, int64_t{3} * kWays * CacheSlotBytes(12, storage::DType::kF32) + 5}}) {
    CacheOptions options;
    options.load_factor = load_factor;
    options.cache_bytes = budget;
    EXPECT_EQ(CacheSlotsFor(tables, options), CachedTbe(engine(), tables, options).num_slots())
        << "load factor " << load_factor << ", budget " << budget;
  }
}

TEST_P(CacheStateTest, SizesThatCannotBeACacheAreRefused) {
  CacheOptions tiny;
  tiny.cache_bytes = 1000;
  try {
    CachedTbe cache(engine(), ops::TbeTables({100}, {16}), tiny);
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("a cache of 1000 bytes is smaller than one set"));
  }
  EXPECT_THROW(ops::TbeTables({}, {}), InvalidArgument);
  EXPECT_THROW(ops::TbeTables({0}, {4}), InvalidArgument);
  CacheOptions bad_dtype;
  bad_dtype.dtype = storage::DType::kI32;
  EXPECT_THROW(CachedTbe(engine(), ops::TbeTables({10}, {4}), bad_dtype), InvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(AllEngines, CacheStateTest, ::testing::ValuesIn(AllEngineCases()),
                         CaseName);

}  // namespace
}  // namespace ember::cache::testing
