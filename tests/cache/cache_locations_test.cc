// How a batch's CacheLocations may be used, on the CPU and every engine
// type: each step out of order is refused at its push with a UsageError
// naming the step and the problem, and changes nothing (no lock taken or
// released, no row updated); a prefetch its op refused leaves no batch in
// flight; a Reset between a batch's Relookup and its Backward refuses the
// Backward rather than lose its update.

#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>
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
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

class CacheLocationsTest : public EngineTest {
 protected:
  // Two tables of 100 rows (dims 4 and 8), four sets.
  std::unique_ptr<CachedTbe> MakeCache() {
    CacheOptions options;
    options.load_factor = 4.0 * kCacheWays / 200.0;
    auto cache = std::make_unique<CachedTbe>(engine(), ops::TbeTables({100, 100}, {4, 8}), options);
    ops::RandomUniform(cache->home(), 7, -1.0f, 1.0f);
    return cache;
  }
  // Batch size 1: table 0's bag holds `rows0`, table 1's `rows1`.
  Batch OneBag(const std::vector<int64_t>& rows0, const std::vector<int64_t>& rows1 = {}) {
    return MakeBatch(engine(), engine::Context::CPU(), 2, 1, {rows0, rows1});
  }
  Tensor Out() {
    return FromHost(engine(), engine::Context::CPU(), std::vector<float>(12, 0.0f), {1, 12});
  }
  // A gradient of 1 on table 0's bag: SGD at rate 1 takes 1 off its rows.
  Tensor GradOfOnes() {
    std::vector<float> grad(12, 0.0f);
    std::fill(grad.begin(), grad.begin() + 4, 1.0f);
    return FromHost(engine(), engine::Context::CPU(), grad, {1, 12});
  }
  static void Sgd(CachedTbe& cache, const Batch& batch, const CacheLocations& where,
                  const Tensor& grad) {
    cache.BackwardSgd(batch.view(), where, grad, {.learning_rate = 1.0f});
  }
  static bool NoLocks(CachedTbe& cache) {
    const CacheSnapshot snapshot = cache.Snapshot();
    return std::all_of(snapshot.locks.begin(), snapshot.locks.end(),
                       [](int32_t lock) { return lock == 0; });
  }
};

// Asserts that `push` throws UsageError with all of `parts` in its message.
template <typename Push, typename... Parts>
void ExpectRefused(Push&& push, const Parts&... parts) {
  EXPECT_THAT(push, ThrowsMessage<UsageError>(AllOf(HasSubstr(parts)...)));
}

TEST_P(CacheLocationsTest, NewLocationsAreZeroed) {
  auto cache = MakeCache();
  CacheLocations where = cache->NewLocations(5);
  const std::vector<int32_t> values = ToHost<int32_t>(where.tensor());
  EXPECT_EQ(values.size(), 2 * 6 + 2);
  EXPECT_TRUE(std::all_of(values.begin(), values.end(), [](int32_t v) { return v == 0; }));
}

TEST_P(CacheLocationsTest, StepsOnLocationsNeverPrefetchedAreRefused) {
  auto cache = MakeCache();
  Batch batch = OneBag({1, 2});
  CacheLocations fresh = cache->NewLocations(2);
  Tensor out = Out();
  const Tensor grad = GradOfOnes();
  ExpectRefused([&] { cache->Forward(batch.view(), fresh, out); }, "[CachedTbe::Forward]",
                "hold no batch (never prefetched)");
  ExpectRefused([&] { Sgd(*cache, batch, fresh, grad); }, "[CachedTbe::BackwardSgd]",
                "hold no batch");
  ExpectRefused([&] { cache->Relookup(batch.view(), fresh); }, "[CachedTbe::Relookup]",
                "each Relookup follows the Prefetch of its batch");
  ExpectRefused([&] { cache->ForwardInference(batch.view(), fresh, out); },
                "[CachedTbe::ForwardInference]", "LookupForInference");
  EXPECT_EQ(cache->batches_in_flight(), 0);
  EXPECT_TRUE(NoLocks(*cache));
  engine().WaitForAll();
}

TEST_P(CacheLocationsTest, APrefetchIntoLocationsInFlightIsRefused) {
  auto cache = MakeCache();
  Batch first = OneBag({1, 2});
  Batch second = OneBag({3, 4});
  CacheLocations where = cache->NewLocations(2);
  cache->Prefetch(first.view(), where);
  const std::vector<int32_t> before = ToHost<int32_t>(where.tensor());
  ExpectRefused([&] { cache->Prefetch(second.view(), where); }, "[CachedTbe::Prefetch]",
                "hold a batch in flight", "Relookup it first");
  ExpectRefused([&] { cache->LookupForInference(second.view(), where); },
                "[CachedTbe::LookupForInference]", "hold a batch in flight");
  EXPECT_EQ(ToHost<int32_t>(where.tensor()), before) << "the first batch's slots and locks";
  EXPECT_EQ(cache->batches_in_flight(), 1);
  cache->Relookup(first.view(), where);
  EXPECT_TRUE(NoLocks(*cache)) << "the first batch's locks released";
  cache->Prefetch(second.view(), where);  // free again
  cache->Relookup(second.view(), where);
  EXPECT_TRUE(NoLocks(*cache));
}

TEST_P(CacheLocationsTest, ARelookupOfLocationsNotInFlightIsRefused) {
  auto cache = MakeCache();
  Batch first = OneBag({1, 2});
  Batch second = OneBag({2, 3});
  CacheLocations a = cache->NewLocations(2);
  CacheLocations b = cache->NewLocations(2);
  cache->Prefetch(first.view(), a);
  cache->Prefetch(second.view(), b);
  cache->Relookup(first.view(), a);
  ExpectRefused([&] { cache->Relookup(first.view(), a); }, "[CachedTbe::Relookup]",
                "hold a batch relooked up already");
  EXPECT_EQ(cache->batches_in_flight(), 1) << "the second batch is still in flight";
  const CacheSnapshot snapshot = cache->Snapshot();
  EXPECT_EQ(std::count(snapshot.locks.begin(), snapshot.locks.end(), 1), 2)
      << "rows 2 and 3 stay locked once, by the second batch";
  cache->Relookup(second.view(), b);
  EXPECT_TRUE(NoLocks(*cache));
}

TEST_P(CacheLocationsTest, StepsOutOfOrderOrWithAnotherBatchAreRefused) {
  auto cache = MakeCache();
  auto other_cache = MakeCache();
  Batch batch = OneBag({1, 2});
  Batch other = OneBag({1, 2});  // the same rows, another batch
  CacheLocations where = cache->NewLocations(2);
  Tensor out = Out();
  const Tensor grad = GradOfOnes();
  cache->Prefetch(batch.view(), where);
  ExpectRefused([&] { Sgd(*cache, batch, where, grad); }, "[CachedTbe::BackwardSgd]",
                "hold a batch in flight", "Backward(i) follows Relookup(i)");
  ExpectRefused([&] { cache->Forward(other.view(), where, out); }, "[CachedTbe::Forward]",
                "the batch is not the one the locations were filled for");
  ExpectRefused([&] { other_cache->Forward(batch.view(), where, out); }, "[CachedTbe::Forward]",
                "made by another CachedTbe");
  cache->Forward(batch.view(), where, out);
  cache->Relookup(batch.view(), where);
  ExpectRefused([&] { cache->Forward(batch.view(), where, out); }, "[CachedTbe::Forward]",
                "hold a batch relooked up already", "between Prefetch(i) and Relookup(i)");
  ExpectRefused([&] { Sgd(*cache, other, where, grad); }, "[CachedTbe::BackwardSgd]",
                "the batch is not the one");
  Sgd(*cache, batch, where, grad);
  cache->ForwardInference(batch.view(), where, out);  // reads the state: any filled locations
  engine().WaitForAll();
}

// The bad index is found by the op, after the push: the op refuses the
// prefetch, and the batch leaves flight once that error is reported.
TEST_P(CacheLocationsTest, APrefetchRefusedForABadIndexLeavesNothingInFlight) {
  auto cache = MakeCache();
  Batch bad = OneBag({1}, {4, 500});
  Batch good = OneBag({1, 2});
  CacheLocations where = cache->NewLocations(3);
  cache->Prefetch(bad.view(), where);
  EXPECT_THROW(engine().WaitForAll(), InvalidArgument);
  EXPECT_EQ(cache->batches_in_flight(), 0);
  EXPECT_NO_THROW(cache->Reset());
  // A read of its locations, once its error was reported, fails as an op.
  Tensor out = Out();
  cache->Forward(bad.view(), where, out);
  try {
    engine().WaitForVar(out.var());
    ADD_FAILURE() << "the read of a refused prefetch ran";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("[CachedTbe::Forward] the Prefetch of this batch was refused"));
  }
  cache->Prefetch(good.view(), where);  // the locations are free
  EXPECT_EQ(cache->batches_in_flight(), 1);
  cache->Relookup(good.view(), where);
  EXPECT_EQ(cache->batches_in_flight(), 0);
  EXPECT_TRUE(NoLocks(*cache));
  engine().WaitForAll();
}

// A schedule pushes on after a prefetch that its op refused, before any
// wait: the batch's Forward is then skipped with the prefetch's own error,
// which the wait reports (not a UsageError at the push).
TEST_P(CacheLocationsTest, AReadOfARefusedPrefetchBeforeItsWaitCarriesItsError) {
  auto cache = MakeCache();
  Batch bad = OneBag({1}, {4, 500});
  CacheLocations where = cache->NewLocations(3);
  cache->Prefetch(bad.view(), where);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (cache->batches_in_flight() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // the op has failed
  }
  ASSERT_EQ(cache->batches_in_flight(), 0);
  Tensor out = Out();
  cache->Forward(bad.view(), where, out);
  try {
    engine().WaitForVar(out.var());
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("[CachedTbe::Prefetch]"));
    EXPECT_THAT(e.what(), HasSubstr("index 500 is out of range"));
  }
  EXPECT_NO_THROW(engine().WaitForAll()) << "that error is reported once";
}

// The schedule's Relookup of the bad batch, pushed before any wait, closes
// it too, and releases nothing (the locations' locked count is zero).
TEST_P(CacheLocationsTest, ARelookupOfARefusedPrefetchReleasesNothing) {
  auto cache = MakeCache();
  Batch held = OneBag({7, 8});
  Batch bad = OneBag({1}, {4, 500});
  CacheLocations a = cache->NewLocations(2);
  CacheLocations b = cache->NewLocations(3);
  cache->Prefetch(held.view(), a);
  engine().WaitForAll();
  cache->Prefetch(bad.view(), b);
  cache->Relookup(bad.view(), b);
  EXPECT_EQ(cache->batches_in_flight(), 1) << "the held batch";
  EXPECT_THROW(engine().WaitForAll(), Error);
  const CacheSnapshot snapshot = cache->Snapshot();
  EXPECT_EQ(std::count(snapshot.locks.begin(), snapshot.locks.end(), 1), 2)
      << "the held batch's locks stay";
  cache->Relookup(held.view(), a);
  EXPECT_TRUE(NoLocks(*cache));
}

// A prefetch the engine skipped (an earlier op's error was on the state)
// never ran: it is refused when the engine drops it, just after.
TEST_P(CacheLocationsTest, APrefetchSkippedForAnEarlierErrorLeavesNothingInFlight) {
  auto cache = MakeCache();
  Batch bad = OneBag({1}, {4, 500});
  Batch good = OneBag({1, 2});
  CacheLocations a = cache->NewLocations(3);
  CacheLocations b = cache->NewLocations(2);
  cache->Prefetch(bad.view(), a);
  cache->Prefetch(good.view(), b);
  EXPECT_THROW(engine().WaitForAll(), Error);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (cache->batches_in_flight() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(cache->batches_in_flight(), 0);
  EXPECT_TRUE(NoLocks(*cache));
  EXPECT_NO_THROW(cache->Reset());
  cache->Prefetch(good.view(), b);
  cache->Relookup(good.view(), b);
  engine().WaitForAll();
}

// Reset empties the slots a relooked-up batch's backward would update, and
// a flush skips empty slots: the Backward is refused, and the batch,
// prefetched again, trains as it should.
TEST_P(CacheLocationsTest, AResetBetweenRelookupAndBackwardRefusesTheBackward) {
  auto cache = MakeCache();
  Batch batch = OneBag({2, 3});
  CacheLocations where = cache->NewLocations(2);
  const Tensor grad = GradOfOnes();
  const std::vector<float> start = ToHost<float>(cache->home());
  cache->Prefetch(batch.view(), where);
  cache->Relookup(batch.view(), where);
  cache->Reset();
  ExpectRefused([&] { Sgd(*cache, batch, where, grad); }, "[CachedTbe::BackwardSgd]",
                "the cache was Reset after the locations were filled", "the update would be lost");
  Tensor out = Out();
  ExpectRefused([&] { cache->ForwardInference(batch.view(), where, out); },
                "[CachedTbe::ForwardInference]", "Reset");
  cache->Flush();
  EXPECT_EQ(ToHost<float>(cache->home()), start) << "nothing updated";
  cache->Prefetch(batch.view(), where);
  cache->Relookup(batch.view(), where);
  Sgd(*cache, batch, where, grad);
  cache->Flush();
  const std::vector<float> home = ToHost<float>(cache->home());
  for (std::size_t i = 0; i < home.size(); ++i) {
    const bool trained = i >= 8 && i < 16;  // rows 2 and 3 of table 0 (dim 4)
    EXPECT_EQ(home[i], start[i] - (trained ? 1.0f : 0.0f)) << "element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(AllEngines, CacheLocationsTest, ::testing::ValuesIn(AllEngineCases()),
                         CaseName);

}  // namespace
}  // namespace ember::cache::testing
