// SyntheticSource: determinism by (seed, example), exact resumption, the
// shape of the data (Zipf rows, pooling, click rate), and labels that a
// model can learn: a logistic regression on the dense features beats the
// base rate, and one that adds the rows beats it further.

#include "tools/train/data/synthetic_source.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>
#include <unordered_map>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/error.h"
#include "storage/memory.h"
#include "tests/train/data_test_util.h"

namespace ember::train {
namespace {

using testing::Example;
using testing::ExpectThrowWith;

// A small world: 4 tables, fast to draw.
SyntheticOptions Small() {
  SyntheticOptions o;
  o.batch_size = 64;
  o.num_examples = 1000;
  o.rows = {1000, 50, 100000, 7};
  o.pooling_mean = 2.5;
  o.pooling_max = 5;
  return o;
}

class SyntheticSourceTest : public ::testing::Test {
 protected:
  std::unique_ptr<engine::Engine> engine_ = testing::MakeEngine();
  BatchMemory memory_{.engine = engine_.get(), .kind = storage::MemoryKind::kCpu};

  std::vector<Example> Read(const SyntheticOptions& options, int64_t seek = -1) {
    SyntheticSource source(options);
    if (seek >= 0) source.Seek(seek);
    return testing::ReadExamples(source, memory_);
  }
};

TEST_F(SyntheticSourceTest, SameSeedGivesTheSameBytes) {
  SyntheticSource a(Small()), b(Small());
  const auto batches_a = testing::ReadAll(a, memory_);
  const auto batches_b = testing::ReadAll(b, memory_);
  ASSERT_EQ(batches_a.size(), batches_b.size());
  for (size_t i = 0; i < batches_a.size(); ++i) {
    EXPECT_EQ(testing::Bytes(batches_a[i]), testing::Bytes(batches_b[i])) << "batch " << i;
  }
  // Another seed gives other examples in the same world.
  SyntheticOptions other = Small();
  other.seed = 2;
  SyntheticSource c(other);
  EXPECT_NE(testing::Bytes(*c.Next(memory_)), testing::Bytes(batches_a[0]));
  EXPECT_EQ(c.bias(), a.bias());
  EXPECT_EQ(c.RowOfRank(0, 0), a.RowOfRank(0, 0));
}

TEST_F(SyntheticSourceTest, BatchesCoverTheDataAndTheLastIsShort) {
  SyntheticSource source(Small());
  EXPECT_EQ(source.size(), 1000);
  const auto batches = testing::ReadAll(source, memory_);
  ASSERT_EQ(batches.size(), 16u);  // 15 x 64 + 40
  for (size_t i = 0; i < batches.size(); ++i) {
    EXPECT_EQ(batches[i].batch_size, i + 1 < batches.size() ? 64 : 40);
    EXPECT_EQ(batches[i].position, std::min<int64_t>(64 * static_cast<int64_t>(i + 1), 1000));
    EXPECT_EQ(batches[i].dense.kind(), storage::MemoryKind::kCpu);
  }
  EXPECT_EQ(source.position(), 1000);
  EXPECT_FALSE(source.Next(memory_).has_value());
  EXPECT_FALSE(source.Next(memory_).has_value());
}

TEST_F(SyntheticSourceTest, ResumingAtAPositionGivesWhatReadingStraightGives) {
  const std::vector<Example> straight = Read(Small());
  ASSERT_EQ(straight.size(), 1000u);
  for (int64_t p : {0, 64, 100, 999, 1000}) {
    const std::vector<Example> resumed = Read(Small(), p);
    ASSERT_EQ(resumed.size(), straight.size() - p) << "from " << p;
    EXPECT_TRUE(std::equal(resumed.begin(), resumed.end(), straight.begin() + p)) << "from " << p;
  }
  // Seek back after reading, too.
  SyntheticSource source(Small());
  (void)testing::ReadAll(source, memory_);
  source.Seek(500);
  const auto again = testing::ReadExamples(source, memory_);
  EXPECT_TRUE(std::equal(again.begin(), again.end(), straight.begin() + 500));
}

TEST_F(SyntheticSourceTest, AForkReadsTheSameDataAtItsOwnPosition) {
  SyntheticSource source(Small());
  const std::vector<Example> straight = Read(Small());
  (void)source.Next(memory_);  // the fork starts at 0 wherever the source stands
  std::unique_ptr<BatchSource> fork = source.Fork();
  ASSERT_NE(fork, nullptr);
  EXPECT_EQ(fork->position(), 0);
  EXPECT_EQ(fork->batch_size(), source.batch_size());
  EXPECT_EQ(fork->spec(), source.spec());
  EXPECT_EQ(fork->size(), source.size());
  fork->Seek(300);
  const std::vector<Example> forked = testing::ReadExamples(*fork, memory_);
  ASSERT_EQ(forked.size(), straight.size() - 300);
  EXPECT_TRUE(std::equal(forked.begin(), forked.end(), straight.begin() + 300));
  EXPECT_EQ(source.position(), 64);  // the source's own position is its own
}

TEST_F(SyntheticSourceTest, ARangeIsTheSameStreamFromBegin) {
  const std::vector<Example> straight = Read(Small());
  SyntheticOptions range = Small();
  range.begin = 300;
  range.num_examples = 200;
  const std::vector<Example> part = Read(range);
  ASSERT_EQ(part.size(), 200u);
  EXPECT_TRUE(std::equal(part.begin(), part.end(), straight.begin() + 300));
}

TEST_F(SyntheticSourceTest, EndlessSourceHasNoSizeAndKeepsGoing) {
  SyntheticOptions o = Small();
  o.num_examples = kEndless;
  SyntheticSource source(o);
  EXPECT_FALSE(source.size().has_value());
  source.Seek(int64_t{1} << 40);
  auto batch = source.Next(memory_);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(batch->position, (int64_t{1} << 40) + 64);
}

TEST_F(SyntheticSourceTest, PoolingHasItsMeanAndMax) {
  SyntheticOptions o = Small();
  o.num_examples = 4000;
  const auto examples = Read(o);
  std::vector<int64_t> histogram(o.pooling_max + 1, 0);
  int64_t total = 0;
  for (const Example& e : examples) {
    for (const auto& bag : e.bags) {
      ASSERT_GE(bag.size(), 1u);
      ASSERT_LE(bag.size(), static_cast<size_t>(o.pooling_max));
      ++histogram[bag.size()];
      total += static_cast<int64_t>(bag.size());
    }
  }
  const double mean = static_cast<double>(total) / (examples.size() * o.rows.size());
  EXPECT_NEAR(mean, o.pooling_mean, 0.05);
  EXPECT_GT(histogram[1], 0);
  EXPECT_GT(histogram[o.pooling_max], 0);

  // Fixed pooling: one index per bag.
  o.pooling_mean = 1;
  o.pooling_max = 1;
  for (const Example& e : Read(o)) {
    for (const auto& bag : e.bags) ASSERT_EQ(bag.size(), 1u);
  }
}

TEST_F(SyntheticSourceTest, RowsFollowZipfWithTheHotRowsScattered) {
  SyntheticOptions o = Small();
  o.num_examples = 20000;
  o.rows = {10000};
  o.pooling_mean = 1;
  o.pooling_max = 1;
  SyntheticSource source(o);
  std::unordered_map<int64_t, int64_t> counts;
  for (const Example& e : testing::ReadExamples(source, memory_)) ++counts[e.bags[0][0]];
  const auto count_of_rank = [&](int64_t k) {
    const auto it = counts.find(source.RowOfRank(0, k));
    return it == counts.end() ? int64_t{0} : it->second;
  };
  // P(rank 0) / P(rank 99) = 100^1.05 ~ 126; the 10 hottest rows of 10000
  // take about a third of the draws.
  EXPECT_GT(count_of_rank(0), 40 * std::max<int64_t>(count_of_rank(99), 1));
  int64_t head = 0;
  for (int k = 0; k < 10; ++k) head += count_of_rank(k);
  EXPECT_GT(head, 20000 / 4);
  EXPECT_LT(head, 20000 / 2);
  // The permutation is a bijection, and it scatters the hot rows.
  std::vector<int64_t> rows(10000);
  for (int64_t k = 0; k < 10000; ++k) rows[static_cast<size_t>(k)] = source.RowOfRank(0, k);
  std::vector<int64_t> sorted = rows;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> iota(10000);
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_EQ(sorted, iota);
  EXPECT_NE(std::vector<int64_t>(rows.begin(), rows.begin() + 10),
            std::vector<int64_t>(iota.begin(), iota.begin() + 10));
}

// A logistic regression fitted by SGD on `train` and scored on `test`:
// dense features (standardized on `train`) and, with `rows`, a weight per
// (table, row) for the bag's rows (the bag's mean, as the hidden model).
struct Fit {
  double log_loss = 0;
  double auc = 0;
};

Fit FitLogistic(const std::vector<Example>& train, const std::vector<Example>& test, bool rows) {
  const size_t d = train[0].dense.size();
  std::vector<double> mean(d, 0), inv_sd(d, 0);
  for (const Example& e : train) {
    for (size_t j = 0; j < d; ++j) mean[j] += e.dense[j];
  }
  for (double& m : mean) m /= train.size();
  for (const Example& e : train) {
    for (size_t j = 0; j < d; ++j) inv_sd[j] += (e.dense[j] - mean[j]) * (e.dense[j] - mean[j]);
  }
  for (double& s : inv_sd) s = s > 0 ? 1 / std::sqrt(s / train.size()) : 0;
  std::vector<double> w(d, 0);
  double bias = 0;
  std::unordered_map<int64_t, double> row_weight;  // key: row * 64 + table
  const auto logit = [&](const Example& e) {
    double z = bias;
    for (size_t j = 0; j < d; ++j) z += w[j] * (e.dense[j] - mean[j]) * inv_sd[j];
    if (rows) {
      for (size_t t = 0; t < e.bags.size(); ++t) {
        for (int64_t r : e.bags[t]) {
          const auto it = row_weight.find(r * 64 + static_cast<int64_t>(t));
          if (it != row_weight.end()) z += it->second / e.bags[t].size();
        }
      }
    }
    return z;
  };
  constexpr double kRate = 0.02;
  for (int epoch = 0; epoch < 4; ++epoch) {
    for (const Example& e : train) {
      const double g = 1 / (1 + std::exp(-logit(e))) - e.label;
      bias -= kRate * g;
      for (size_t j = 0; j < d; ++j) w[j] -= kRate * g * (e.dense[j] - mean[j]) * inv_sd[j];
      if (rows) {
        for (size_t t = 0; t < e.bags.size(); ++t) {
          for (int64_t r : e.bags[t]) {
            row_weight[r * 64 + static_cast<int64_t>(t)] -= 5 * kRate * g / e.bags[t].size();
          }
        }
      }
    }
  }
  Fit fit;
  std::vector<std::pair<double, float>> scored;
  for (const Example& e : test) {
    const double p = std::clamp(1 / (1 + std::exp(-logit(e))), 1e-7, 1 - 1e-7);
    fit.log_loss -= e.label > 0 ? std::log(p) : std::log(1 - p);
    scored.emplace_back(p, e.label);
  }
  fit.log_loss /= test.size();
  // AUC: the chance that a positive outranks a negative (ranks, no ties).
  std::sort(scored.begin(), scored.end());
  double positives = 0, negatives = 0, rank_sum = 0;
  for (size_t i = 0; i < scored.size(); ++i) {
    if (scored[i].second > 0) {
      positives += 1;
      rank_sum += static_cast<double>(i + 1);
    } else {
      negatives += 1;
    }
  }
  fit.auc = (rank_sum - positives * (positives + 1) / 2) / (positives * negatives);
  return fit;
}

TEST_F(SyntheticSourceTest, LabelsAreLearnable) {
  SyntheticOptions o = Small();
  o.rows = {1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000};
  o.batch_size = 1024;
  o.num_examples = 40000;
  const std::vector<Example> train = Read(o);
  // Held out: another seed of the same world.
  o.seed = 99;
  o.num_examples = 10000;
  const std::vector<Example> test = Read(o);

  double clicks = 0;
  for (const Example& e : train) clicks += e.label;
  const double rate = clicks / train.size();
  EXPECT_NEAR(rate, o.click_rate, 0.02);
  const double base = -(rate * std::log(rate) + (1 - rate) * std::log(1 - rate));

  const Fit dense = FitLogistic(train, test, /*rows=*/false);
  const Fit both = FitLogistic(train, test, /*rows=*/true);
  std::printf("base-rate log loss %.4f; dense-only %.4f (AUC %.3f); dense+rows %.4f (AUC %.3f)\n",
              base, dense.log_loss, dense.auc, both.log_loss, both.auc);
  EXPECT_LT(dense.log_loss, base - 0.03);
  EXPECT_GT(dense.auc, 0.65);
  EXPECT_LT(both.log_loss, dense.log_loss - 0.01);
  EXPECT_GT(both.auc, dense.auc + 0.01);
}

TEST_F(SyntheticSourceTest, RefusesBadOptionsNamingThem) {
  const auto expect_bad = [](auto mutate, std::string what) {
    SyntheticOptions o = Small();
    mutate(o);
    ExpectThrowWith<InvalidArgument>([&] { SyntheticSource s(o); }, {"[SyntheticSource]", what});
  };
  expect_bad([](SyntheticOptions& o) { o.rows = {}; }, "rows is empty");
  expect_bad([](SyntheticOptions& o) { o.rows = {10, 0}; }, "rows[1] = 0");
  expect_bad([](SyntheticOptions& o) { o.click_rate = 1.0; }, "click_rate = 1");
  expect_bad([](SyntheticOptions& o) { o.pooling_mean = 6; }, "pooling_mean = 6");
  expect_bad([](SyntheticOptions& o) { o.pooling_max = 0; }, "pooling_max = 0");
  expect_bad([](SyntheticOptions& o) { o.zipf_alpha = -0.5; }, "zipf_alpha = -0.5");
  expect_bad([](SyntheticOptions& o) { o.num_examples = -2; }, "num_examples = -2");
  expect_bad([](SyntheticOptions& o) { o.begin = -1; }, "begin = -1");
  ExpectThrowWith<InvalidArgument>(
      [] {
        SyntheticOptions o = Small();
        o.batch_size = 0;
        SyntheticSource s(o);
      },
      {"[BatchSource]", "batch size 0"});
  SyntheticSource source(Small());
  ExpectThrowWith<InvalidArgument>([&] { source.Seek(1001); },
                                   {"[SyntheticSource::Seek]", "1001", "[0, 1000]"});
  ExpectThrowWith<InvalidArgument>([&] { source.Seek(-1); }, {"[SyntheticSource::Seek]", "-1"});
}

}  // namespace
}  // namespace ember::train
