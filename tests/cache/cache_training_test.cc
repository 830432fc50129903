// Training through the cache is exact: with integer-valued weights and
// gradients and SGD (sums exact in any order), the cached TBE gives the
// uncached TBE's pooled outputs at every step and, after a flush, its
// weights, under the baseline and the prefetch-overlap push orders, with 1,
// 6 and 12 prefetch passes and both policies, with caches small enough for
// conflict misses; row-wise Adagrad and Adam likewise (the same kernels on
// the same values: bit for bit). Lock counts equal the batches in flight
// using each slot, and drop to zero after the last relookup.

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cache/cached_tbe.h"
#include "ops/embedding_bag.h"
#include "tests/cache/cache_test_util.h"
#include "tests/engine/engine_cases.h"

namespace ember::cache::testing {
namespace {

using engine::testing::AllEngineCases;
using engine::testing::CaseName;
using engine::testing::EngineTest;

enum class Order { kBaseline, kPrefetch };
enum class Optimizer { kSgd, kRowwiseAdagrad, kAdam };

const std::vector<int64_t> kRows = {60, 30, 90};
const std::vector<int64_t> kDims = {4, 8, 16};
constexpr int64_t kBatchSize = 8;

int64_t TotalDim() { return 4 + 8 + 16; }

// Random bags, skewed to low rows so that batches share rows.
std::vector<std::vector<int64_t>> RandomBags(std::mt19937_64& rng) {
  std::vector<std::vector<int64_t>> bags;
  for (std::size_t t = 0; t < kRows.size(); ++t) {
    for (int64_t b = 0; b < kBatchSize; ++b) {
      std::vector<int64_t> bag;
      const int n = static_cast<int>(rng() % 7);
      for (int i = 0; i < n; ++i) {
        const int64_t r = static_cast<int64_t>(rng() % kRows[t]);
        bag.push_back(rng() % 2 == 0 ? r / 4 : r);
      }
      bags.push_back(bag);
    }
  }
  return bags;
}

std::vector<float> RandomInts(std::mt19937_64& rng, std::size_t n, int span) {
  std::vector<float> values(n);
  for (float& v : values) v = static_cast<float>(static_cast<int>(rng() % (2 * span + 1)) - span);
  return values;
}

struct Trained {
  std::vector<std::vector<float>> outputs;  // per step
  std::vector<float> weights;               // after the last step (and a flush)
  std::vector<float> state;                 // the optimizer state, if any
};

class CacheTrainingTest : public EngineTest {
 protected:
  // The trace: batches and gradients, the same for every run.
  void MakeTrace(int steps, uint64_t seed) {
    std::mt19937_64 rng(seed);
    initial_ = RandomInts(rng, 60 * 4 + 30 * 8 + 90 * 16, 8);
    for (int i = 0; i < steps; ++i) {
      bags_.push_back(RandomBags(rng));
      grads_.push_back(RandomInts(rng, static_cast<std::size_t>(kBatchSize * TotalDim()), 3));
    }
  }

  storage::Tensor Grad(int i) {
    return FromHost(engine(), engine::Context::CPU(), grads_[i], {kBatchSize, TotalDim()});
  }
  storage::Tensor Out() {
    return FromHost(engine(), engine::Context::CPU(),
                    std::vector<float>(kBatchSize * TotalDim(), 0.0f), {kBatchSize, TotalDim()});
  }

  void Backward(const ops::TbeTables& tables, storage::Tensor& weights, const ops::TbeBatch& batch,
                const storage::Tensor& grad, Optimizer optimizer, int step,
                storage::Tensor* state) {
    switch (optimizer) {
      case Optimizer::kSgd:
        ops::EmbeddingBagBackwardSgd(tables, weights, batch, grad, {.learning_rate = 1.0f});
        break;
      case Optimizer::kRowwiseAdagrad:
        ops::EmbeddingBagBackwardRowwiseAdagrad(tables, weights, state[0], batch, grad,
                                                {.learning_rate = 0.5f});
        break;
      case Optimizer::kAdam:
        ops::EmbeddingBagBackwardAdam(tables, weights, state[0], state[1], batch, grad, step,
                                      {.learning_rate = 0.1f});
        break;
    }
  }

  // The uncached TBE on the trace.
  Trained Reference(Optimizer optimizer) {
    const ops::TbeTables tables(kRows, kDims);
    storage::Tensor weights = FromHost(engine(), engine::Context::CPU(), initial_);
    const int64_t elements = tables.total_elements();
    storage::Tensor state[2] = {
        FromHost(engine(), engine::Context::CPU(),
                 std::vector<float>(optimizer == Optimizer::kAdam ? elements : tables.total_rows(),
                                    0.0f)),
        FromHost(engine(), engine::Context::CPU(), std::vector<float>(elements, 0.0f))};
    Trained run;
    for (std::size_t i = 0; i < bags_.size(); ++i) {
      Batch batch = MakeBatch(engine(), engine::Context::CPU(), 3, kBatchSize, bags_[i]);
      storage::Tensor out = Out();
      ops::EmbeddingBagForward(tables, weights, batch.view(), out);
      run.outputs.push_back(ToHost<float>(out));
      storage::Tensor grad = Grad(static_cast<int>(i));
      Backward(tables, weights, batch.view(), grad, optimizer, static_cast<int>(i) + 1, state);
    }
    run.weights = ToHost<float>(weights);
    if (optimizer != Optimizer::kSgd) run.state = ToHost<float>(state[0]);
    return run;
  }

  // The cached TBE on the trace in push order `order`, checking the locks
  // after every prefetch.
  Trained Cached(Order order, int passes, CachePolicy policy, int64_t sets, Optimizer optimizer) {
    CacheOptions options;
    options.prefetch_passes = passes;
    options.policy = policy;
    options.load_factor = static_cast<double>(sets * 32) / 180.0;
    CachedTbe cache(engine(), ops::TbeTables(kRows, kDims), options);
    EXPECT_EQ(cache.num_sets(), sets);
    FromHost(engine(), engine::Context::CPU(), initial_).CopyTo(cache.home());
    const int steps = static_cast<int>(bags_.size());
    std::vector<Batch> batches;
    std::vector<CacheLocations> where;
    for (int i = 0; i < steps; ++i) {
      batches.push_back(MakeBatch(engine(), engine::Context::CPU(), 3, kBatchSize, bags_[i]));
      where.push_back(cache.NewLocations(batches.back().indices.numel()));
    }
    std::vector<int> in_flight;
    auto prefetch = [&](int i) {
      cache.Prefetch(batches[i].view(), where[i]);
      in_flight.push_back(i);
      ExpectLocks(cache, batches, where, in_flight);
    };
    auto step = [&](int i, Trained* run) {
      storage::Tensor out = Out();
      cache.Forward(batches[i].view(), where[i], out);
      run->outputs.push_back(ToHost<float>(out));
      cache.Relookup(batches[i].view(), where[i]);
      in_flight.erase(std::find(in_flight.begin(), in_flight.end(), i));
      storage::Tensor grad = Grad(i);
      switch (optimizer) {
        case Optimizer::kSgd:
          cache.BackwardSgd(batches[i].view(), where[i], grad, {.learning_rate = 1.0f});
          break;
        case Optimizer::kRowwiseAdagrad:
          cache.BackwardRowwiseAdagrad(batches[i].view(), where[i], grad, {.learning_rate = 0.5f});
          break;
        case Optimizer::kAdam:
          cache.BackwardAdam(batches[i].view(), where[i], grad, i + 1, {.learning_rate = 0.1f});
          break;
      }
    };
    Trained run;
    if (order == Order::kPrefetch) prefetch(0);
    for (int i = 0; i < steps; ++i) {
      if (order == Order::kBaseline) {
        prefetch(i);
      } else if (i + 1 < steps) {
        prefetch(i + 1);
      }
      step(i, &run);
    }
    const CacheSnapshot end = cache.Snapshot();
    EXPECT_TRUE(std::all_of(end.locks.begin(), end.locks.end(), [](int32_t l) { return l == 0; }))
        << "locks left after the last relookup";
    cache.Flush();
    run.weights = ToHost<float>(cache.home());
    if (optimizer == Optimizer::kRowwiseAdagrad) run.state = ToHost<float>(cache.accumulator());
    if (optimizer == Optimizer::kAdam) run.state = ToHost<float>(cache.adam_m());
    return run;
  }

  // Each slot's lock count is the number of batches in flight whose
  // prefetch placed one of their rows in it (their locations name it).
  void ExpectLocks(CachedTbe& cache, const std::vector<Batch>& batches,
                   const std::vector<CacheLocations>& where, const std::vector<int>& in_flight) {
    std::map<int64_t, int32_t> expected;
    for (int i : in_flight) {
      const int64_t n = batches[i].indices.numel();
      const std::vector<int32_t> all = ToHost<int32_t>(where[i].tensor());
      const std::set<int32_t> slots(all.begin(), all.begin() + n);
      for (int32_t slot : slots) {
        if (slot >= 0) ++expected[slot];
      }
    }
    const CacheSnapshot snapshot = cache.Snapshot();
    for (std::size_t s = 0; s < snapshot.locks.size(); ++s) {
      const auto at = expected.find(static_cast<int64_t>(s));
      ASSERT_EQ(snapshot.locks[s], at == expected.end() ? 0 : at->second) << "slot " << s;
    }
  }

  std::vector<float> initial_;
  std::vector<std::vector<std::vector<int64_t>>> bags_;
  std::vector<std::vector<float>> grads_;
};

void ExpectSameRun(const Trained& got, const Trained& expected, const std::string& what) {
  ASSERT_EQ(got.outputs.size(), expected.outputs.size());
  for (std::size_t i = 0; i < got.outputs.size(); ++i) {
    ASSERT_EQ(got.outputs[i], expected.outputs[i]) << what << ": pooled output of step " << i;
  }
  EXPECT_EQ(got.weights, expected.weights) << what << ": home rows after a flush";
  EXPECT_EQ(got.state, expected.state) << what << ": optimizer state";
}

TEST_P(CacheTrainingTest, SgdIsExactInEveryOrderPassCountAndPolicy) {
  MakeTrace(10, 5);
  const Trained reference = Reference(Optimizer::kSgd);
  for (Order order : {Order::kBaseline, Order::kPrefetch}) {
    for (int passes : {1, 6, 12}) {
      for (CachePolicy policy : {CachePolicy::kLru, CachePolicy::kLfu}) {
        for (int64_t sets : {1, 2}) {
          const std::string what = "order " + std::to_string(static_cast<int>(order)) + ", " +
                                   std::to_string(passes) + " passes, policy " +
                                   std::to_string(static_cast<int>(policy)) + ", " +
                                   std::to_string(sets) + " sets";
          ExpectSameRun(Cached(order, passes, policy, sets, Optimizer::kSgd), reference, what);
        }
      }
    }
  }
}

TEST_P(CacheTrainingTest, RowwiseAdagradAndAdamMatchTheUncachedTbe) {
  MakeTrace(6, 9);
  for (Optimizer optimizer : {Optimizer::kRowwiseAdagrad, Optimizer::kAdam}) {
    const Trained reference = Reference(optimizer);
    for (Order order : {Order::kBaseline, Order::kPrefetch}) {
      ExpectSameRun(Cached(order, 6, CachePolicy::kLru, 1, optimizer), reference,
                    "optimizer " + std::to_string(static_cast<int>(optimizer)));
    }
  }
}

// FBGEMM's cache-invalidation case, directed: row 40 misses in batch 1 (the
// one set is full of batch 0's locked rows) and is inserted by prefetch(2)
// before backward(1) runs; the relookup sends batch 1's update to its slot.
TEST_P(CacheTrainingTest, ARowInsertedByTheNextPrefetchGetsItsUpdateInTheSlot) {
  initial_ = std::vector<float>(60 * 4 + 30 * 8 + 90 * 16, 1.0f);
  std::vector<int64_t> rows32(32);
  for (int r = 0; r < 32; ++r) rows32[r] = r;
  auto only_table0 = [](std::vector<int64_t> rows) {
    std::vector<std::vector<int64_t>> bags(3 * kBatchSize);
    bags[0] = std::move(rows);
    return bags;
  };
  bags_ = {only_table0(rows32), only_table0({40}), only_table0({40}), only_table0({40})};
  for (int i = 0; i < 4; ++i) grads_.push_back(std::vector<float>(kBatchSize * TotalDim(), 1.0f));
  const Trained reference = Reference(Optimizer::kSgd);
  ExpectSameRun(Cached(Order::kPrefetch, 1, CachePolicy::kLru, 1, Optimizer::kSgd), reference,
                "inserted by the next prefetch");
}

// A batch with more distinct rows than the whole cache: the rest are
// conflict misses, read and updated at home, and still exact.
TEST_P(CacheTrainingTest, ABatchLargerThanTheCacheIsExact) {
  MakeTrace(0, 1);
  std::vector<std::vector<int64_t>> bags(3 * kBatchSize);
  for (int b = 0; b < kBatchSize; ++b) {
    for (int r = 0; r < 8; ++r) bags[b].push_back(b * 7 + r);  // 56 distinct rows of table 0
  }
  bags_ = {bags, bags, bags};
  std::mt19937_64 rng(3);
  for (int i = 0; i < 3; ++i) grads_.push_back(RandomInts(rng, kBatchSize * TotalDim(), 3));
  const Trained reference = Reference(Optimizer::kSgd);
  for (Order order : {Order::kBaseline, Order::kPrefetch}) {
    ExpectSameRun(Cached(order, 1, CachePolicy::kLru, 1, Optimizer::kSgd), reference,
                  "batch larger than the cache");
  }
}

INSTANTIATE_TEST_SUITE_P(AllEngines, CacheTrainingTest, ::testing::ValuesIn(AllEngineCases()),
                         CaseName);

}  // namespace
}  // namespace ember::cache::testing
