// SyntheticSource::Slice (tools/train/data/synthetic_source.h), the source
// each rank of a sharded run reads: rank r's slice of every batch is, byte
// for byte, SliceBatch of the whole batch, for 1, 2 and 3 ranks, through
// Next, a Fork and a Seek, to the end of a finite stream; a slice it
// cannot make (a batch or size that does not split) is null, a bad rank an
// error.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/engine_options.h"
#include "engine/error.h"
#include "tests/train/train_test_util.h"
#include "tools/train/data/synthetic_source.h"
#include "tools/train/dist/sharded_dlrm.h"

namespace ember::train {
namespace {

using storage::Tensor;
using ::testing::HasSubstr;

constexpr int64_t kBatch = 12;

template <typename T>
std::vector<T> Values(const Tensor& t) {
  t.WaitToRead();
  return {t.data<T>(), t.data<T>() + t.numel()};
}

void ExpectSameBatch(const HostBatch& got, const HostBatch& want, const std::string& where) {
  EXPECT_EQ(got.batch_size, want.batch_size) << where;
  EXPECT_EQ(Values<float>(got.dense), Values<float>(want.dense)) << where;
  EXPECT_EQ(Values<float>(got.labels), Values<float>(want.labels)) << where;
  EXPECT_EQ(Values<int64_t>(got.offsets), Values<int64_t>(want.offsets)) << where;
  EXPECT_EQ(Values<int64_t>(got.indices), Values<int64_t>(want.indices)) << where;
}

class SyntheticSliceTest : public ::testing::Test {
 protected:
  SyntheticOptions Data(int64_t examples) const {
    return testing::TinyData(testing::TinyModel(), kBatch, examples);
  }
  std::unique_ptr<engine::Engine> engine_ =
      engine::CreateEngine(engine::ParseEngineType("ThreadedEnginePerDevice"));
  BatchMemory memory_{.engine = engine_.get()};
};

TEST_F(SyntheticSliceTest, EachSliceIsTheSlicedBatch) {
  for (int ranks : {1, 2, 3}) {
    for (int r = 0; r < ranks; ++r) {
      SyntheticSource whole(Data(kEndless));
      const std::unique_ptr<BatchSource> slice = whole.Slice(r, ranks);
      ASSERT_NE(slice, nullptr) << ranks << " ranks";
      EXPECT_EQ(slice->batch_size(), kBatch / ranks);
      for (int k = 0; k < 3; ++k) {
        const std::optional<HostBatch> got = slice->Next(memory_);
        const std::optional<HostBatch> global = whole.Next(memory_);
        ASSERT_TRUE(got && global);
        const std::string where = "rank " + std::to_string(r) + " of " + std::to_string(ranks) +
                                  ", batch " + std::to_string(k);
        ExpectSameBatch(*got, SliceBatch(*engine_, *global, r, ranks), where);
        EXPECT_EQ(got->position, (k + 1) * kBatch / ranks) << where;
      }
    }
  }
}

// The loader's threads read a slice through forks that seek.
TEST_F(SyntheticSliceTest, AForkThatSeeksReadsTheSameSlice) {
  SyntheticSource whole(Data(kEndless));
  const std::unique_ptr<BatchSource> slice = whole.Slice(1, 3);
  const std::unique_ptr<BatchSource> fork = slice->Fork();
  ASSERT_NE(fork, nullptr);
  fork->Seek(2 * slice->batch_size());
  for (int k = 0; k < 2; ++k) (void)slice->Next(memory_);
  const std::optional<HostBatch> third = slice->Next(memory_);
  const std::optional<HostBatch> forked = fork->Next(memory_);
  ASSERT_TRUE(third && forked);
  ExpectSameBatch(*forked, *third, "the fork's third batch");
}

TEST_F(SyntheticSliceTest, AFiniteSliceEndsWithItsStream) {
  SyntheticSource whole(Data(3 * kBatch));
  const std::unique_ptr<BatchSource> slice = whole.Slice(0, 2);
  ASSERT_NE(slice, nullptr);
  EXPECT_EQ(slice->size(), std::optional<int64_t>(3 * kBatch / 2));
  for (int k = 0; k < 3; ++k) EXPECT_TRUE(slice->Next(memory_).has_value()) << "batch " << k;
  EXPECT_FALSE(slice->Next(memory_).has_value());
  slice->Seek(kBatch / 2);
  EXPECT_TRUE(slice->Next(memory_).has_value());
  EXPECT_THROW(slice->Seek(3 * kBatch / 2 + 1), InvalidArgument);
}

TEST_F(SyntheticSliceTest, WhatDoesNotSplitHasNoSlice) {
  SyntheticSource whole(Data(kEndless));
  EXPECT_EQ(whole.Slice(0, 5), nullptr) << "12 examples do not split over 5 ranks";
  EXPECT_EQ(SyntheticSource(Data(kBatch + 6)).Slice(0, 2), nullptr)
      << "a last batch of 6 of 12 examples";
  EXPECT_EQ(whole.Slice(0, 2)->Slice(0, 2), nullptr) << "a slice of a slice";
  try {
    (void)whole.Slice(2, 2);
    FAIL() << "rank 2 of 2 was taken";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("[SyntheticSource::Slice] rank 2 of 2"));
  }
}

}  // namespace
}  // namespace ember::train
