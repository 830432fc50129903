// ShardedTbe (tools/train/dist/sharded_tbe.h) against one TBE over the
// concatenated batch: with 2 and 4 ranks (threads, each with its own
// engine), every engine type, table-wise and row-wise shards, several
// steps of forward and backward with SGD, row-wise Adagrad or Adam give
// equal pooled rows (bit for bit where a table has one owner) and
// bit-identical weights and optimizer state, in the baseline order and in
// the sparse-dist one (batch i+1's input distribution pushed before batch
// i's lookup). Also the layout's moves on their own, and the plans it
// refuses.

#include "tools/train/dist/sharded_tbe.h"

#include <bit>
#include <cstdint>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/engine_options.h"
#include "engine/error.h"
#include "ops/embedding_bag.h"
#include "storage/tensor.h"
#include "tests/train/dist/dist_test_util.h"
#include "tools/train/dist/in_process_communicator.h"

namespace ember::train {
namespace {

using engine::Engine;
using storage::DType;
using storage::Tensor;
using testing::ErrorOf;
using ::testing::HasSubstr;

constexpr int kSteps = 3;
constexpr float kLr = 0.25f;
const std::vector<int64_t> kRows = {50, 80, 30, 120, 64, 40};
const std::vector<int64_t> kDims = {4, 8, 4, 12, 8, 4};

// Every rank's local batch of one step, as the unsharded TBE sees them:
// table t's bags of rank 0, then of rank 1, ...
struct Batches {
  // [rank][t][b] -> the bag's indices
  std::vector<std::vector<std::vector<std::vector<int64_t>>>> bags;
};

Batches MakeBatches(int ranks, int64_t local_batch, int step) {
  std::mt19937_64 rng(static_cast<uint64_t>(1000 * step + ranks));
  Batches out;
  out.bags.resize(ranks);
  for (int r = 0; r < ranks; ++r) {
    out.bags[r].resize(kRows.size());
    for (size_t t = 0; t < kRows.size(); ++t) {
      for (int64_t b = 0; b < local_batch; ++b) {
        std::vector<int64_t> bag(rng() % 5);  // empty bags too
        // Half hot rows, so that rows repeat across ranks' bags; half
        // anywhere, so that a row-wise table's bags span its shards.
        for (int64_t& index : bag) {
          index = static_cast<int64_t>(rng() % 2 == 0 ? rng() % 6 : rng() % kRows[t]);
        }
        out.bags[r][t].push_back(std::move(bag));
      }
    }
  }
  return out;
}

float InitialWeight(size_t t, int64_t element) {
  return static_cast<float>((element * 37 + static_cast<int64_t>(t) * 11) % 101) / 101.0f - 0.5f;
}

float Grad(int64_t global_example, int64_t column, int step) {
  return static_cast<float>((global_example * 13 + column * 7 + int64_t{step} * 5) % 17) / 17.0f -
         0.4f;
}

std::unique_ptr<Engine> MakeEngine(engine::EngineType type, int workers) {
  engine::EngineOptions options;
  options.type = type;
  options.cpu_workers = workers;
  options.pool_workers = workers;
  return engine::CreateEngine(options);
}

Tensor Host(Engine& engine, std::vector<int64_t> shape, DType dtype) {
  Tensor t = Tensor::Empty(engine, std::move(shape), dtype, engine::Context::CPU());
  t.WaitToWrite();
  return t;
}

// A TBE batch of `bags` ([t][b] in table-major order) as host tensors.
struct HostBatch {
  Tensor indices, offsets;
  ops::TbeBatch view(int64_t batch_size) const { return {&indices, &offsets, nullptr, batch_size}; }
};

HostBatch MakeHostBatch(Engine& engine,
                        const std::vector<std::vector<std::vector<int64_t>>>& bags) {
  std::vector<int64_t> indices, offsets = {0};
  for (const auto& table : bags) {
    for (const auto& bag : table) {
      indices.insert(indices.end(), bag.begin(), bag.end());
      offsets.push_back(static_cast<int64_t>(indices.size()));
    }
  }
  HostBatch batch{Host(engine, {static_cast<int64_t>(indices.size())}, DType::kI64),
                  Host(engine, {static_cast<int64_t>(offsets.size())}, DType::kI64)};
  std::copy(indices.begin(), indices.end(), batch.indices.data<int64_t>());
  std::copy(offsets.begin(), offsets.end(), batch.offsets.data<int64_t>());
  return batch;
}

enum class Opt { kSgd, kAdagrad, kAdam };

const ops::RowwiseAdagradOptions kAdagrad{.learning_rate = kLr, .eps = 1e-6f};
const ops::AdamOptions kAdam{.learning_rate = kLr};

std::vector<float> Values(const Tensor& t) {
  t.WaitToRead();
  return {t.data<float>(), t.data<float>() + t.numel()};
}

// The unsharded TBE over the concatenated batches: pooled rows per step
// ([B, total_dim]), the final weights and optimizer state (Adagrad: the
// accumulator in `state_a`; Adam: m and v).
struct Reference {
  std::vector<std::vector<float>> pooled;
  std::vector<float> weights, state_a, state_b;
};

Tensor Zeros(Engine& engine, int64_t n) {
  Tensor t = Host(engine, {n}, DType::kF32);
  std::fill_n(t.data<float>(), n, 0.0f);
  return t;
}

Reference RunUnsharded(int ranks, int64_t local_batch, Opt opt) {
  const ops::TbeTables tables(kRows, kDims);
  const int64_t batch = ranks * local_batch;
  auto engine = MakeEngine(engine::EngineType::kNaive, 1);
  Tensor weights = Host(*engine, {tables.total_elements()}, DType::kF32);
  for (int t = 0; t < tables.num_tables(); ++t) {
    for (int64_t e = 0; e < tables.rows(t) * tables.dim(t); ++e) {
      weights.data<float>()[tables.weight_offset(t) + e] = InitialWeight(t, e);
    }
  }
  Tensor state_a =
      Zeros(*engine, opt == Opt::kAdagrad ? tables.total_rows() : tables.total_elements());
  Tensor state_b = Zeros(*engine, tables.total_elements());
  Reference ref;
  for (int step = 0; step < kSteps; ++step) {
    const Batches local = MakeBatches(ranks, local_batch, step);
    std::vector<std::vector<std::vector<int64_t>>> global(kRows.size());
    for (size_t t = 0; t < kRows.size(); ++t) {
      for (int r = 0; r < ranks; ++r) {
        global[t].insert(global[t].end(), local.bags[r][t].begin(), local.bags[r][t].end());
      }
    }
    HostBatch b = MakeHostBatch(*engine, global);
    Tensor out = Host(*engine, {batch, tables.total_dim()}, DType::kF32);
    ops::EmbeddingBagForward(tables, weights, b.view(batch), out);
    out.WaitToRead();
    ref.pooled.emplace_back(out.data<float>(), out.data<float>() + out.numel());
    Tensor grads = Host(*engine, {batch, tables.total_dim()}, DType::kF32);
    for (int64_t g = 0; g < batch; ++g) {
      for (int64_t c = 0; c < tables.total_dim(); ++c) {
        grads.data<float>()[g * tables.total_dim() + c] = Grad(g, c, step);
      }
    }
    switch (opt) {
      case Opt::kSgd:
        ops::EmbeddingBagBackwardSgd(tables, weights, b.view(batch), grads, {.learning_rate = kLr});
        break;
      case Opt::kAdagrad:
        ops::EmbeddingBagBackwardRowwiseAdagrad(tables, weights, state_a, b.view(batch), grads,
                                                kAdagrad);
        break;
      case Opt::kAdam:
        ops::EmbeddingBagBackwardAdam(tables, weights, state_a, state_b, b.view(batch), grads,
                                      step + 1, kAdam);
        break;
    }
  }
  ref.weights = Values(weights);
  ref.state_a = Values(state_a);
  ref.state_b = Values(state_b);
  return ref;
}

struct Case {
  const char* name;
  engine::EngineType type;
  int workers;
  int ranks;
  const char* plan;
  bool sparse_dist;
  Opt opt = Opt::kSgd;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class ShardedTbeTest : public ::testing::TestWithParam<Case> {};

bool SameBits(float a, float b) { return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b); }

TEST_P(ShardedTbeTest, EqualsOneTbeOverTheWholeBatch) {
  const Case& c = GetParam();
  constexpr int64_t kLocalBatch = 3;
  const ops::TbeTables tables(kRows, kDims);
  const ShardPlan plan = ParseShardPlan(c.plan, tables.num_tables(), c.ranks);
  const ShardLayout layout(plan, tables, kLocalBatch);
  const Reference ref = RunUnsharded(c.ranks, kLocalBatch, c.opt);

  InProcessCommunicatorGroup group(c.ranks);
  std::vector<std::vector<std::vector<float>>> pooled(c.ranks);  // [rank][step]
  std::vector<std::vector<float>> weights(c.ranks), state_a(c.ranks), state_b(c.ranks);
  testing::RunRankThreads(c.ranks, [&](int r) {
    auto engine = MakeEngine(c.type, c.workers);
    CollectiveOps collectives(*engine, group.communicator(r));
    ShardedTbe tbe(*engine, collectives, layout, r);
    tbe.weights().WaitToWrite();
    for (int j = 0; j < tbe.tables().num_tables(); ++j) {
      const ShardLayout::Shard& shard = layout.shards(r)[j];
      const int64_t first = shard.row_begin * tbe.tables().dim(j);  // in the whole table
      for (int64_t e = 0; e < tbe.tables().rows(j) * tbe.tables().dim(j); ++e) {
        tbe.weights().data<float>()[tbe.tables().weight_offset(j) + e] =
            InitialWeight(static_cast<size_t>(shard.table), first + e);
      }
    }
    // Baseline: each step's distribution, lookup and backward in turn.
    // Sparse-dist: step i+1's distribution pushed before step i's
    // lookup (it reads no weights: the same result).
    std::vector<HostBatch> batches;
    std::vector<std::shared_ptr<ShardedTbe::Step>> steps;
    auto distribute = [&](int step) {
      batches.push_back(MakeHostBatch(*engine, MakeBatches(c.ranks, kLocalBatch, step).bags[r]));
      steps.push_back(tbe.DistributeInput(batches.back().view(kLocalBatch)));
    };
    if (c.sparse_dist) distribute(0);
    for (int step = 0; step < kSteps; ++step) {
      if (!c.sparse_dist) distribute(step);
      if (c.sparse_dist && step + 1 < kSteps) distribute(step + 1);
      Tensor out = Host(*engine, {kLocalBatch, tables.total_dim()}, DType::kF32);
      tbe.Lookup(*steps[step], out);
      Tensor grads = Host(*engine, {kLocalBatch, tables.total_dim()}, DType::kF32);
      for (int64_t b = 0; b < kLocalBatch; ++b) {
        for (int64_t col = 0; col < tables.total_dim(); ++col) {
          grads.data<float>()[b * tables.total_dim() + col] = Grad(r * kLocalBatch + b, col, step);
        }
      }
      switch (c.opt) {
        case Opt::kSgd:
          tbe.BackwardSgd(*steps[step], grads, {.learning_rate = kLr});
          break;
        case Opt::kAdagrad:
          tbe.BackwardRowwiseAdagrad(*steps[step], grads, kAdagrad);
          break;
        case Opt::kAdam:
          tbe.BackwardAdam(*steps[step], grads, step + 1, kAdam);
          break;
      }
      out.WaitToRead();
      pooled[r].emplace_back(out.data<float>(), out.data<float>() + out.numel());
    }
    tbe.weights().WaitToRead();
    weights[r] = Values(tbe.weights());
    if (c.opt == Opt::kAdagrad) state_a[r] = Values(tbe.accumulator());
    if (c.opt == Opt::kAdam) state_a[r] = Values(tbe.adam_m()), state_b[r] = Values(tbe.adam_v());
    engine->WaitForAll();
  });

  // Pooled rows: a table-wise table's columns bit for bit; a row-wise
  // table's are sums of the owners' partial sums (float rounding apart).
  const int64_t total_dim = tables.total_dim();
  std::vector<bool> row_wise_column(total_dim, false);
  for (int t = 0; t < tables.num_tables(); ++t) {
    for (int64_t col = 0; col < tables.dim(t); ++col) {
      row_wise_column[tables.output_offset(t) + col] = plan.tables[t].kind == ShardKind::kRowWise;
    }
  }
  for (int step = 0; step < kSteps; ++step) {
    for (int r = 0; r < c.ranks; ++r) {
      for (int64_t k = 0; k < kLocalBatch * total_dim; ++k) {
        const float got = pooled[r][step][k];
        const float want = ref.pooled[step][r * kLocalBatch * total_dim + k];
        if (row_wise_column[k % total_dim]) {
          ASSERT_NEAR(got, want, 1e-5f) << "step " << step << ", rank " << r << ", element " << k;
        } else {
          ASSERT_TRUE(SameBits(got, want))
              << "step " << step << ", rank " << r << ", element " << k;
        }
      }
    }
  }
  // Weights: every shard's rows bit for bit (each row's gradient sums run
  // in one TBE's order whatever the sharding).
  for (int r = 0; r < c.ranks; ++r) {
    const ops::TbeTables owned = layout.OwnedTables(r);
    for (int j = 0; j < owned.num_tables(); ++j) {
      const ShardLayout::Shard& shard = layout.shards(r)[j];
      const int64_t first = tables.weight_offset(shard.table) + shard.row_begin * owned.dim(j);
      for (int64_t e = 0; e < owned.rows(j) * owned.dim(j); ++e) {
        const int64_t at = owned.weight_offset(j) + e;
        ASSERT_TRUE(SameBits(weights[r][at], ref.weights[first + e]))
            << "table " << shard.table << " on rank " << r << ", element " << e;
        if (c.opt == Opt::kAdam) {
          ASSERT_TRUE(SameBits(state_a[r][at], ref.state_a[first + e]) &&
                      SameBits(state_b[r][at], ref.state_b[first + e]))
              << "Adam's moments of table " << shard.table << ", element " << e;
        }
      }
      const int64_t first_row = tables.row_offset(shard.table) + shard.row_begin;
      for (int64_t row = 0; c.opt == Opt::kAdagrad && row < owned.rows(j); ++row) {
        ASSERT_TRUE(SameBits(state_a[r][owned.row_offset(j) + row], ref.state_a[first_row + row]))
            << "Adagrad's accumulator of table " << shard.table << ", row " << row;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Engines, ShardedTbeTest,
    ::testing::Values(
        Case{"Naive_2ranks", engine::EngineType::kNaive, 1, 2, "0:0,1:1,2:0,3:1,4:1,5:0", false},
        Case{"Threaded2_2ranks", engine::EngineType::kThreaded, 2, 2, "0:1,1:1,2:0,3:0,4:1,5:0",
             false},
        Case{"PerDevice1_4ranks", engine::EngineType::kThreadedPerDevice, 1, 4,
             "0:0,1:1,2:2,3:3,4:0,5:2", false},
        Case{"PerDevice2_4ranks", engine::EngineType::kThreadedPerDevice, 2, 4,
             "0:3,1:2,2:1,3:0,4:3,5:1", false},
        Case{"Naive_2ranks_RowWise", engine::EngineType::kNaive, 1, 2,
             "0:row,1:1,2:0,3:row,4:1,5:0", false},
        Case{"PerDevice2_4ranks_RowWise", engine::EngineType::kThreadedPerDevice, 2, 4,
             "0:row,1:1,2:2,3:3,4:0,5:row", false},
        Case{"Threaded2_4ranks_AllRowWise", engine::EngineType::kThreaded, 2, 4,
             "0:row,1:row,2:row,3:row,4:row,5:row", true},
        Case{"Naive_2ranks_SparseDist", engine::EngineType::kNaive, 1, 2, "0:0,1:1,2:0,3:1,4:1,5:0",
             true},
        Case{"Threaded2_4ranks_SparseDist", engine::EngineType::kThreaded, 2, 4,
             "0:0,1:1,2:2,3:3,4:0,5:2", true},
        Case{"PerDevice2_2ranks_SparseDist", engine::EngineType::kThreadedPerDevice, 2, 2,
             "0:1,1:1,2:0,3:0,4:1,5:0", true},
        Case{"PerDevice2_2ranks_RowWise_Adagrad", engine::EngineType::kThreadedPerDevice, 2, 2,
             "0:row,1:1,2:0,3:row,4:1,5:0", false, Opt::kAdagrad},
        Case{"Threaded2_4ranks_SparseDist_Adagrad", engine::EngineType::kThreaded, 2, 4,
             "0:0,1:1,2:2,3:3,4:0,5:row", true, Opt::kAdagrad},
        Case{"Naive_2ranks_RowWise_Adam", engine::EngineType::kNaive, 1, 2,
             "0:row,1:1,2:0,3:row,4:1,5:0", false, Opt::kAdam},
        Case{"PerDevice2_4ranks_Adam", engine::EngineType::kThreadedPerDevice, 2, 4,
             "0:3,1:2,2:1,3:0,4:3,5:row", true, Opt::kAdam}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

TEST(ShardLayoutTest, RefusesIdleRanksAndShortRowWiseTables) {
  const ops::TbeTables tables(kRows, kDims);
  EXPECT_THAT(ErrorOf([&] {
                (void)ShardLayout(ParseShardPlan("0:0,1:0,2:0,3:0,4:0,5:0", 6, 2), tables, 2);
              }),
              HasSubstr("rank 1 owns no shard"));
  EXPECT_THAT(
      ErrorOf([&] {
        (void)ShardLayout(ParseShardPlan("0:row,1:0", 2, 3), ops::TbeTables({2, 5}, {4, 4}), 2);
      }),
      HasSubstr("row-wise table 0 has 2 rows, fewer than the 3 ranks"));
  EXPECT_THAT(ErrorOf([&] { (void)ShardLayout(ParseShardPlan("0:0,1:1", 2, 2), tables, 2); }),
              HasSubstr("the plan places 2 tables; the TBE has 6"));
}

// A row-wise table's bag goes to each owner with the indices in its rows,
// as rows of its shard.
TEST(ShardLayoutTest, RowWiseBagsSplitByOwner) {
  const ops::TbeTables tables({10}, {2});
  const ShardLayout layout(ParseShardPlan("0:row", 1, 2), tables, 2);  // rows 0-4, 5-9
  const std::vector<int64_t> offsets = {0, 3, 4};
  const std::vector<int64_t> indices = {7, 1, 5, 4};
  std::vector<int64_t> lengths(4), send(4), counts(2);
  layout.PackInput(offsets, indices, lengths, send, counts);
  EXPECT_EQ(lengths, (std::vector<int64_t>{1, 1, 2, 0}));
  EXPECT_EQ(send, (std::vector<int64_t>{1, 4, 2, 0}));
  EXPECT_EQ(counts, (std::vector<int64_t>{2, 2}));
}

// The moves on their own: what rank 0 packs for owner 1 is what owner 1
// unpacks as its batch's first rank's bags.
TEST(ShardLayoutTest, PackAndUnpackRoundTrip) {
  const ops::TbeTables tables({10, 10, 10}, {2, 3, 2});
  const ShardLayout layout(ParseShardPlan("0:1,1:0,2:1", 3, 2), tables, 2);
  // Rank 0's local batch: tables 0, 1, 2 with 2 bags each.
  const std::vector<int64_t> offsets = {0, 1, 3, 3, 4, 6, 7};
  const std::vector<int64_t> indices = {1, 2, 3, 4, 5, 6, 7};
  std::vector<int64_t> lengths(6), send(7), counts(2);
  layout.PackInput(offsets, indices, lengths, send, counts);
  // Owner 0 gets table 1's bags; owner 1 tables 0 and 2.
  EXPECT_EQ(lengths, (std::vector<int64_t>{0, 1, 1, 2, 2, 1}));
  EXPECT_EQ(send, (std::vector<int64_t>{4, 1, 2, 3, 5, 6, 7}));
  EXPECT_EQ(counts, (std::vector<int64_t>{1, 6}));
  // Owner 1 receives rank 0's part and (say) rank 1's: one index a bag.
  const std::vector<int64_t> received_lengths = {1, 2, 2, 1, 1, 1, 1, 1};
  const std::vector<int64_t> received = {1, 2, 3, 5, 6, 7, 8, 9, 8, 9};
  EXPECT_EQ(layout.IndexCounts(1, received_lengths), (std::vector<int64_t>{6, 4}));
  std::vector<int64_t> owner_offsets(2 * 4 + 1), owner_indices(10);
  layout.UnpackInput(1, received_lengths, received, owner_offsets, owner_indices);
  // Table 0: rank 0's bags {1} {2,3}, rank 1's {8} {9}; table 2: {5,6} {7}, {8} {9}.
  EXPECT_EQ(owner_offsets, (std::vector<int64_t>{0, 1, 3, 4, 5, 7, 8, 9, 10}));
  EXPECT_EQ(owner_indices, (std::vector<int64_t>{1, 2, 3, 8, 9, 5, 6, 7, 8, 9}));
}

// A bad batch is refused on the host, by table, bag and value, never
// dropped: an index outside its table would fall in no shard.
TEST(ShardLayoutTest, PackInputRefusesABadIndexOrOffsets) {
  const ops::TbeTables tables({10, 10}, {2, 2});
  const ShardLayout layout(ParseShardPlan("0:0,1:row", 2, 2), tables, 2);
  std::vector<int64_t> lengths(6), send(4), counts(2);
  const std::vector<int64_t> offsets = {0, 1, 2, 3, 4};
  EXPECT_EQ(ErrorOf([&] {
              layout.PackInput(offsets, std::vector<int64_t>{1, 2, 3, 10}, lengths, send, counts);
            }),
            "[ShardedTbe::DistributeInput] table 1, bag 1: index 10 is out of range [0, 10)");
  EXPECT_EQ(ErrorOf([&] {
              layout.PackInput(std::vector<int64_t>{0, 1, 3, 2, 4},
                               std::vector<int64_t>{1, 2, 3, 4}, lengths, send, counts);
            }),
            "[ShardedTbe::DistributeInput] table 1, bag 0: offsets [3, 2) outside the 4 indices, "
            "or decreasing");
}

// A rank whose batch is bad reports its own error; its peers fail at once
// with the group broken by that rank, and nobody waits for a timeout.
TEST(ShardedTbeErrorTest, ABadBatchOnOneRankStopsEveryRank) {
  const ops::TbeTables tables(kRows, kDims);
  const ShardLayout layout(ParseShardPlan("0:0,1:1,2:0,3:1,4:1,5:0", 6, 2), tables, 3);
  InProcessCommunicatorGroup group(2);
  std::vector<std::string> errors(2);
  testing::RunRankThreads(2, [&](int r) {
    auto engine = MakeEngine(engine::EngineType::kThreadedPerDevice, 2);
    CollectiveOps collectives(*engine, group.communicator(r));
    ShardedTbe tbe(*engine, collectives, layout, r);
    auto bags = MakeBatches(2, 3, 0).bags[r];
    if (r == 1) bags[2][1] = {4, 999};
    const HostBatch batch = MakeHostBatch(*engine, bags);
    try {
      (void)tbe.DistributeInput(batch.view(3));
      errors[r] = "no error";
    } catch (const std::exception& e) {
      errors[r] = e.what();
    }
    engine->WaitForAll();
  });
  EXPECT_EQ(errors[1],
            "[ShardedTbe::DistributeInput] table 2, bag 1: index 999 is out of range "
            "[0, 30)");
  EXPECT_THAT(errors[0], HasSubstr("rank 1 broke the group: the input of 'lengths of step 0' "
                                   "failed on rank 1 (its own wait reports why)"));
}

}  // namespace
}  // namespace ember::train
