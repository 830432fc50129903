#include "tests/ops/embedding_bag_cached_rows.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "ops/embedding_bag.h"
#include "tests/ops/op_test_util.h"

namespace ember::ops::testing {
namespace {

constexpr int64_t kSlots = 24;
constexpr int64_t kBatch = 6;

struct Case {
  std::vector<int64_t> rows = {50, 9, 70};
  std::vector<int64_t> dims = {4, 8, 36};
  std::vector<int64_t> indices;
  std::vector<int64_t> offsets{0};
  std::vector<float> weights;
  std::vector<float> grad;
  std::vector<int32_t> locations;  // per index
  std::vector<float> slots;        // kSlots x slot_dim
  std::vector<float> cached_home;  // weights with the cached rows overwritten
  std::vector<int64_t> slot_of;    // per linear row: its slot or -1
  int64_t slot_dim = 36;
};

Case MakeCase(uint64_t seed) {
  std::mt19937_64 rng(seed);
  Case c;
  const TbeTables tables(c.rows, c.dims);
  for (int t = 0; t < 3; ++t) {
    for (int64_t b = 0; b < kBatch; ++b) {
      const int64_t n = static_cast<int64_t>(rng() % 6);
      for (int64_t i = 0; i < n; ++i) c.indices.push_back(static_cast<int64_t>(rng() % c.rows[t]));
      c.offsets.push_back(static_cast<int64_t>(c.indices.size()));
    }
  }
  c.weights = RandomFloats(rng, static_cast<std::size_t>(tables.total_elements()), -1.0f, 1.0f);
  c.grad = RandomFloats(rng, static_cast<std::size_t>(kBatch * tables.total_dim()), -1.0f, 1.0f);
  // Cache a random half of the rows (up to kSlots) in shuffled slots.
  std::vector<int64_t> linear(static_cast<std::size_t>(tables.total_rows()));
  std::iota(linear.begin(), linear.end(), 0);
  std::shuffle(linear.begin(), linear.end(), rng);
  c.slot_of.assign(linear.size(), -1);
  c.slots.assign(static_cast<std::size_t>(kSlots * c.slot_dim), 7.0f);
  c.cached_home = c.weights;
  for (int64_t s = 0; s < kSlots; ++s) {
    const int64_t row = linear[static_cast<std::size_t>(s * 3 % linear.size())];
    if (c.slot_of[row] >= 0) continue;
    c.slot_of[row] = s;
    int t = 0;
    while (t + 1 < 3 && tables.row_offset(t + 1) <= row) ++t;
    const int64_t first = tables.weight_offset(t) + (row - tables.row_offset(t)) * c.dims[t];
    for (int64_t d = 0; d < c.dims[t]; ++d) {
      c.slots[s * c.slot_dim + d] = c.weights[first + d];
      c.cached_home[first + d] = 1e6f;  // a read of a cached row from home shows
    }
  }
  for (int t = 0, k = 0; t < 3; ++t) {
    for (int64_t b = 0; b < kBatch; ++b) {
      for (; k < c.offsets[t * kBatch + b + 1]; ++k) {
        c.locations.push_back(static_cast<int32_t>(c.slot_of[tables.row_offset(t) + c.indices[k]]));
      }
    }
  }
  return c;
}

// Per slot, 1 where a row of the batch is cached: the slots a backward
// updates, and so flags dirty.
std::vector<int32_t> SlotsUsed(const Case& c) {
  std::vector<int32_t> used(kSlots, 0);
  for (const int32_t slot : c.locations) {
    if (slot >= 0) used[slot] = 1;
  }
  return used;
}

// Home rows with the slots written back: what a cache flush leaves.
std::vector<float> Flushed(const Case& c, std::vector<float> home,
                           const std::vector<float>& slots) {
  const TbeTables tables(c.rows, c.dims);
  for (int64_t row = 0; row < static_cast<int64_t>(c.slot_of.size()); ++row) {
    if (c.slot_of[row] < 0) continue;
    int t = 0;
    while (t + 1 < 3 && tables.row_offset(t + 1) <= row) ++t;
    const int64_t first = tables.weight_offset(t) + (row - tables.row_offset(t)) * c.dims[t];
    for (int64_t d = 0; d < c.dims[t]; ++d)
      home[first + d] = slots[c.slot_of[row] * c.slot_dim + d];
  }
  return home;
}

}  // namespace

void CheckCachedRowsMatchHomeRows(const std::string& engine_name, engine::Context ctx, DType dtype,
                                  CachedOptimizer optimizer, uint64_t seed) {
  auto engine = MakeEngine(engine_name);
  const Case c = MakeCase(seed);
  const TbeTables tables(c.rows, c.dims);
  const auto n = static_cast<int64_t>(c.indices.size());
  Tensor indices = FromHost(*engine, c.indices, {n}, ctx, DType::kI64);
  Tensor offsets = FromHost(*engine, c.offsets, {3 * kBatch + 1}, ctx, DType::kI64);
  const TbeBatch batch{&indices, &offsets, nullptr, kBatch};
  Tensor plain = FromHost(*engine, c.weights, {tables.total_elements()}, ctx, dtype);
  Tensor home = FromHost(*engine, c.cached_home, {tables.total_elements()}, ctx, dtype);
  Tensor slots = FromHost(*engine, c.slots, {kSlots, c.slot_dim}, ctx, dtype);
  Tensor locations = FromHost(*engine, c.locations, {n}, ctx, DType::kI32);
  Tensor dirty = FromHost(*engine, std::vector<int32_t>(kSlots, 0), {kSlots}, ctx, DType::kI32);
  const TbeCachedRows cached{&locations, &slots, nullptr, &dirty};

  Tensor out_plain = FromHost(*engine, std::vector<float>(kBatch * tables.total_dim(), 0.0f),
                              {kBatch, tables.total_dim()}, ctx, DType::kF32);
  Tensor out_cached = FromHost(*engine, std::vector<float>(kBatch * tables.total_dim(), 0.0f),
                               {kBatch, tables.total_dim()}, ctx, DType::kF32);
  EmbeddingBagForward(tables, plain, batch, out_plain);
  EmbeddingBagForward(tables, home, batch, out_cached, {}, &cached);
  EXPECT_EQ(ToHost<float>(out_cached), ToHost<float>(out_plain)) << "forward";
  EXPECT_EQ(ToHost<int32_t>(dirty), std::vector<int32_t>(kSlots, 0)) << "a forward flags nothing";

  Tensor grad = FromHost(*engine, c.grad, {kBatch, tables.total_dim()}, ctx, DType::kF32);
  auto zeros = [&](int64_t count) {
    return FromHost(*engine, std::vector<float>(count, 0.0f), {count}, ctx, DType::kF32);
  };
  Tensor state_plain[2] = {zeros(tables.total_elements()), zeros(tables.total_elements())};
  Tensor state_cached[2] = {zeros(tables.total_elements()), zeros(tables.total_elements())};
  Tensor acc_plain = zeros(tables.total_rows());
  Tensor acc_cached = zeros(tables.total_rows());
  for (int step = 1; step <= 2; ++step) {
    switch (optimizer) {
      case CachedOptimizer::kSgd:
        EmbeddingBagBackwardSgd(tables, plain, batch, grad, {.learning_rate = 0.5f});
        EmbeddingBagBackwardSgd(tables, home, batch, grad, {.learning_rate = 0.5f}, {}, &cached);
        break;
      case CachedOptimizer::kRowwiseAdagrad:
        EmbeddingBagBackwardRowwiseAdagrad(tables, plain, acc_plain, batch, grad, {});
        EmbeddingBagBackwardRowwiseAdagrad(tables, home, acc_cached, batch, grad, {}, {}, &cached);
        break;
      case CachedOptimizer::kAdam:
        EmbeddingBagBackwardAdam(tables, plain, state_plain[0], state_plain[1], batch, grad, step,
                                 {});
        EmbeddingBagBackwardAdam(tables, home, state_cached[0], state_cached[1], batch, grad, step,
                                 {}, {}, &cached);
        break;
    }
  }
  const std::vector<float> expected = ToHost<float>(plain);
  const std::vector<float> got = Flushed(c, ToHost<float>(home), ToHost<float>(slots));
  EXPECT_EQ(got, expected) << "the updated rows, slots written back";
  EXPECT_EQ(ToHost<int32_t>(dirty), SlotsUsed(c)) << "dirty: exactly the slots the batch uses";
  EXPECT_EQ(ToHost<float>(acc_cached), ToHost<float>(acc_plain)) << "row-wise Adagrad state";
  EXPECT_EQ(ToHost<float>(state_cached[0]), ToHost<float>(state_plain[0])) << "Adam m";
  EXPECT_EQ(ToHost<float>(state_cached[1]), ToHost<float>(state_plain[1])) << "Adam v";
}

}  // namespace ember::ops::testing
