// Sharded training (tools/train/dist/sharded_dlrm.h, sharded_schedule.h)
// against the unsharded model: 2 and 4 ranks (threads, each with its own
// engine and an in-process communicator), every sharded schedule, every
// optimizer. With table-wise shards every rank's dense parameters and
// optimizer state and every owner's rows and table state are bit-identical
// to one Trainer's over the same global batches with dense_grad_slices =
// ranks (its cache evicting and missing), with or without a cache on each
// rank (also evicting); the losses (the ranks' parts summed) within float
// rounding. With a row-wise table the pooled rows
// differ in the last bits, and so does what depends on them: within 1e-4.

#include "tools/train/dist/sharded_dlrm.h"

#include <bit>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/engine_options.h"
#include "engine/error.h"
#include "tests/train/dist/dist_test_util.h"
#include "tests/train/train_test_util.h"
#include "tools/train/dist/in_process_communicator.h"
#include "tools/train/dist/sharded_schedule.h"
#include "tools/train/dist/sharded_trainer.h"
#include "tools/train/trainer.h"

namespace ember::train {
namespace {

using storage::Tensor;
using Weights = std::map<std::string, std::vector<float>>;

constexpr int64_t kGlobalBatch = 8;
constexpr int kSteps = 6;

// Five tables, so that four ranks all own one table-wise.
ModelConfig Model(Optimizer optimizer) {
  ModelConfig m = testing::TinyModel(optimizer);
  m.table_rows = {50, 120, 200, 80, 64};
  return m;
}

struct Outcome {
  std::vector<float> losses;
  Weights weights;
  int64_t evicted = 0;  // rows the rank's cache evicted
  // Per step with a next batch: the stages of that batch the step pushed
  // (Ahead).
  std::vector<std::string> ahead;
};

// The stages of `batch` pushed so far, e.g. "lengths indices prefetch".
std::string Ahead(const ShardedBatch& batch) {
  std::string stages;
  for (const auto& [pushed, name] :
       {std::pair{batch.lengths_sent, "lengths"}, std::pair{batch.distributed, "indices"},
        std::pair{batch.prefetched, "prefetch"}, std::pair{batch.embedded, "lookup"}}) {
    if (pushed) stages += (stages.empty() ? "" : " ") + std::string(name);
  }
  return stages;
}

std::vector<float> Values(const Tensor& t) {
  t.WaitToRead();
  return {t.data<float>(), t.data<float>() + t.numel()};
}

Outcome RunUnsharded(const std::string& engine_name, ShardedSchedule schedule, Optimizer optimizer,
                     int ranks) {
  auto engine = testing::NewEngine(engine_name);
  const ModelConfig model = Model(optimizer);
  TrainOptions options = testing::TinyOptions(model, SingleProcessTwin(schedule), kSteps);
  options.placement.dense_grad_slices = ranks;
  Outcome run;
  Trainer trainer(
      *engine, options,
      std::make_unique<SyntheticSource>(testing::TinyData(model, kGlobalBatch, kEndless)), nullptr);
  for (const StepRecord& r : trainer.Run().records) run.losses.push_back(r.loss);
  run.weights = testing::ReadWeights(trainer.model());
  return run;
}

// One rank's run: its dense state, its owned rows and their state, and the
// losses it saw (every rank sees the global loss).
Outcome RunRank(const std::string& engine_name, ShardedSchedule schedule, Optimizer optimizer,
                const ShardLayout& layout, InProcessCommunicatorGroup& group, int rank,
                bool cached) {
  auto engine = testing::NewEngine(engine_name);
  const ModelConfig config = Model(optimizer);
  CollectiveOps collectives(*engine, group.communicator(rank));
  std::optional<cache::CacheOptions> cache;
  if (cached) {
    cache.emplace();
    // One set of 32 slots for each rank's 200-314 rows: rows come and go.
    cache->cache_bytes =
        cache::kCacheWays * cache::CacheSlotBytes(config.embedding_dim, storage::DType::kF32);
  }
  ShardedDlrm model(*engine, collectives, layout, rank, config, cache);
  model.Initialize();
  SyntheticSource data(testing::TinyData(config, kGlobalBatch, kEndless));
  const BatchMemory memory{engine.get()};
  auto upload = [&](ShardedBatch& batch, int step) {
    model.Upload(batch, SliceBatch(*engine, *data.Next(memory), rank, layout.ranks()));
    batch.state.step = step;
  };
  // As the trainer runs it: batches i+1 and i+2 uploaded while step i is
  // pushed, so that i+2's lengths go out ahead.
  ShardedBatch ring[3];
  upload(ring[0], 0);
  if (kSteps > 1) upload(ring[1], 1);
  Outcome run;
  for (int step = 0; step < kSteps; ++step) {
    ShardedBatch& cur = ring[step % 3];
    ShardedBatch* next = step + 1 < kSteps ? &ring[(step + 1) % 3] : nullptr;
    ShardedBatch* after_next = step + 2 < kSteps ? &ring[(step + 2) % 3] : nullptr;
    if (after_next != nullptr) upload(*after_next, step + 2);
    PushShardedStep(schedule, model, cur, next, after_next);
    if (next != nullptr) run.ahead.push_back(Ahead(*next));
    run.losses.push_back(Values(model.Loss(cur))[0]);
  }
  if (cached) run.evicted = model.tbe().cache()->TotalStats().all.evicted;
  model.tbe().Flush();
  model.dense().ForEachState(
      [&](const std::string& name, Tensor& t) { run.weights[name] = Values(t); });
  run.weights["tables.weights"] = Values(model.tbe().weights());
  if (optimizer == Optimizer::kAdagrad) {
    run.weights["tables.accumulator"] = Values(model.tbe().accumulator());
  }
  if (optimizer == Optimizer::kAdam) {
    run.weights["tables.adam_m"] = Values(model.tbe().adam_m());
    run.weights["tables.adam_v"] = Values(model.tbe().adam_v());
  }
  engine->WaitForAll();
  return run;
}

struct Case {
  std::string engine;
  int ranks;
  const char* plan;
  bool row_wise;
  bool cached = false;  // an embedding cache on each rank
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.engine << "_" << c.ranks << "ranks" << (c.row_wise ? "_rowwise" : "")
      << (c.cached ? "_cached" : "");
}

class ShardedDlrmTest
    : public ::testing::TestWithParam<std::tuple<Case, ShardedSchedule, Optimizer>> {};

bool SameBits(float a, float b) { return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b); }

// `got` against `want`: bit for bit, or within `tol` (relative to 1).
void ExpectMatch(const std::vector<float>& got, const std::vector<float>& want, double tol,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (tol == 0) {
      ASSERT_TRUE(SameBits(got[i], want[i]))
          << what << "[" << i << "]: " << got[i] << " != " << want[i];
    } else {
      ASSERT_NEAR(got[i], want[i], tol * std::max(1.0f, std::abs(want[i])))
          << what << "[" << i << "]";
    }
  }
}

TEST_P(ShardedDlrmTest, EqualsTheUnshardedModel) {
  // Not structured bindings: Clang 14 cannot capture those in a lambda.
  const Case& c = std::get<0>(GetParam());
  const ShardedSchedule schedule = std::get<1>(GetParam());
  const Optimizer optimizer = std::get<2>(GetParam());
  const ModelConfig config = Model(optimizer);
  const ops::TbeTables tables = config.tables();
  const ShardPlan plan = ParseShardPlan(c.plan, config.num_tables(), c.ranks);
  const ShardLayout layout(plan, tables, kGlobalBatch / c.ranks);
  const Outcome ref = RunUnsharded(c.engine, schedule, optimizer, c.ranks);
  ASSERT_EQ(ref.losses.size(), static_cast<size_t>(kSteps));

  InProcessCommunicatorGroup group(c.ranks);
  std::vector<Outcome> runs(c.ranks);
  testing::RunRankThreads(c.ranks, [&](int r) {
    runs[r] = RunRank(c.engine, schedule, optimizer, layout, group, r, c.cached);
  });

  const double tol = c.row_wise ? 1e-4 : 0.0;
  for (int r = 0; r < c.ranks; ++r) {
    SCOPED_TRACE(::testing::Message() << "rank " << r);
    if (c.cached) {
      EXPECT_GT(runs[r].evicted, 0) << "the cache must have worked";
    }
    ASSERT_EQ(runs[r].losses.size(), ref.losses.size());
    for (int s = 0; s < kSteps; ++s) {
      EXPECT_NEAR(runs[r].losses[s], ref.losses[s], 1e-5 * std::abs(ref.losses[s]))
          << "loss of step " << s;
    }
    for (const auto& [name, want] : ref.weights) {
      if (name.starts_with("tables.")) continue;
      ExpectMatch(runs[r].weights.at(name), want, tol, name);
    }
    // The owned shards' rows (and Adagrad's per-row, Adam's per-element
    // state) at their place in the unsharded tables.
    const ops::TbeTables owned = layout.OwnedTables(r);
    for (int j = 0; j < owned.num_tables(); ++j) {
      const ShardLayout::Shard& shard = layout.shards(r)[j];
      const int64_t dim = owned.dim(j);
      for (const char* name : {"tables.weights", "tables.adam_m", "tables.adam_v"}) {
        if (!ref.weights.contains(name)) continue;
        const std::vector<float>& all = ref.weights.at(name);
        const auto begin = all.begin() + tables.weight_offset(shard.table) + shard.row_begin * dim;
        const auto mine = runs[r].weights.at(name).begin() + owned.weight_offset(j);
        ExpectMatch(std::vector<float>(mine, mine + owned.rows(j) * dim),
                    std::vector<float>(begin, begin + owned.rows(j) * dim), tol,
                    std::string(name) + " of table " + std::to_string(shard.table));
      }
      if (ref.weights.contains("tables.accumulator")) {
        const std::vector<float>& all = ref.weights.at("tables.accumulator");
        const auto begin = all.begin() + tables.row_offset(shard.table) + shard.row_begin;
        const auto mine = runs[r].weights.at("tables.accumulator").begin() + owned.row_offset(j);
        ExpectMatch(std::vector<float>(mine, mine + owned.rows(j)),
                    std::vector<float>(begin, begin + owned.rows(j)), tol,
                    "accumulator of table " + std::to_string(shard.table));
      }
    }
  }
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (const std::string& engine : testing::RuntimeEngineNames()) {
    cases.push_back({engine, 2, "0:0,1:1,2:0,3:1,4:1", false});
    cases.push_back({engine, 4, "0:0,1:1,2:2,3:3,4:1", false});
  }
  cases.push_back({"ThreadedEnginePerDevice", 2, "0:0,1:row,2:1,3:row,4:0", true});
  for (const std::string& engine : testing::RuntimeEngineNames()) {
    cases.push_back({engine, 2, "0:0,1:1,2:0,3:1,4:1", false, true});
  }
  return cases;
}

std::string CaseName(
    const ::testing::TestParamInfo<std::tuple<Case, ShardedSchedule, Optimizer>>& info) {
  const auto& [c, schedule, optimizer] = info.param;
  std::string name = c.engine + "_" + std::to_string(c.ranks) + "ranks" +
                     (c.row_wise ? "_rowwise" : "") + (c.cached ? "_cached_" : "_") +
                     std::string(ToString(schedule)) + "_" + std::string(ToString(optimizer));
  std::erase(name, '-');
  return name;
}

INSTANTIATE_TEST_SUITE_P(
    Dist, ShardedDlrmTest,
    ::testing::Combine(::testing::ValuesIn(Cases()), ::testing::ValuesIn(AllShardedSchedules()),
                       ::testing::Values(Optimizer::kSgd, Optimizer::kAdagrad, Optimizer::kAdam)),
    CaseName);

// What each pipeline pushes of batch i+1 within step i (sharded_schedule.h),
// with a cache on each rank: sparse-dist its input distribution and its
// cache prefetch, fused and semisync its lookup too; baseline nothing.
TEST(ShardedScheduleTest, EachPipelinePushesItsShareOfTheNextBatch) {
  const std::map<ShardedSchedule, std::string> want = {
      {ShardedSchedule::kBaseline, ""},
      {ShardedSchedule::kSparseDist, "lengths indices prefetch"},
      {ShardedSchedule::kFused, "lengths indices prefetch lookup"},
      {ShardedSchedule::kSemisync, "lengths indices prefetch lookup"}};
  const ModelConfig config = Model(Optimizer::kAdagrad);
  const ShardLayout layout(ParseShardPlan("0:0,1:1,2:0,3:1,4:0", config.num_tables(), 2),
                           config.tables(), kGlobalBatch / 2);
  for (const auto& entry : want) {
    // Not structured bindings: Clang 14 cannot capture those in a lambda.
    const ShardedSchedule schedule = entry.first;
    const std::string& stages = entry.second;
    SCOPED_TRACE(std::string(ToString(schedule)));
    InProcessCommunicatorGroup group(2);
    std::vector<Outcome> runs(2);
    testing::RunRankThreads(2, [&](int r) {
      runs[r] = RunRank("ThreadedEnginePerDevice", schedule, Optimizer::kAdagrad, layout, group, r,
                        /*cached=*/true);
    });
    for (const Outcome& run : runs) {
      ASSERT_EQ(run.ahead.size(), static_cast<size_t>(kSteps - 1));
      for (const std::string& pushed : run.ahead) EXPECT_EQ(pushed, stages);
    }
  }
}

// The runner ember-train --ranks uses: every step reported once, in order,
// and the gathered state (tables at their unsharded place) equal to the
// Trainer's bit for bit; a batch that does not split is refused.
TEST(TrainShardedTest, GathersTheStateOfOneProcess) {
  const ModelConfig config = Model(Optimizer::kAdagrad);
  ShardedTrainOptions options;
  options.model = config;
  options.plan = ParseShardPlan("0:1,1:0,2:1,3:0,4:0", config.num_tables(), 2);
  options.schedule = ShardedSchedule::kSparseDist;
  options.steps = kSteps;
  options.cache.emplace();
  options.engine = engine::ParseEngineType("ThreadedEnginePerDevice");
  auto data = [&] {
    return std::make_unique<SyntheticSource>(testing::TinyData(config, kGlobalBatch, kEndless));
  };
  std::vector<int64_t> reported;
  const ShardedTrainResult result =
      TrainSharded(options, data, [&](int64_t step, float) { reported.push_back(step); });
  EXPECT_EQ(reported, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(result.losses.size(), static_cast<size_t>(kSteps));
  EXPECT_EQ(result.examples, kSteps * kGlobalBatch);
  const Outcome ref =
      RunUnsharded("ThreadedEnginePerDevice", options.schedule, Optimizer::kAdagrad, 2);
  const StateDifference diff = CompareStates(result.state, ref.weights);
  EXPECT_TRUE(diff.identical()) << diff.Describe();
  EXPECT_EQ(result.losses.size(), ref.losses.size());

  auto odd = [&] {
    return std::make_unique<SyntheticSource>(testing::TinyData(config, 7, kEndless));
  };
  EXPECT_EQ(testing::ErrorOf([&] { (void)TrainSharded(options, odd); }),
            "[TrainSharded] a global batch of 7 examples does not split over 2 ranks");
}

// Several hosts, each a process running its part of the ranks, as two
// calls on two threads sharing one group: every part sees the losses and
// the dense state of the run of all ranks in one call, and keeps no tables
// (their shards are split over the parts).
TEST(TrainShardedTest, PartsOfTheRanksInSeveralCallsTrainAsOne) {
  const ModelConfig config = Model(Optimizer::kAdagrad);
  ShardedTrainOptions options;
  options.model = config;
  options.plan = ParseShardPlan("0:1,1:0,2:1,3:0,4:0", config.num_tables(), 2);
  options.steps = kSteps;
  options.engine = engine::ParseEngineType("ThreadedEnginePerDevice");
  auto data = [&] {
    return std::make_unique<SyntheticSource>(testing::TinyData(config, kGlobalBatch, kEndless));
  };
  const ShardedTrainResult whole = TrainSharded(options, data);

  InProcessCommunicatorGroup group(2);
  std::vector<ShardedTrainResult> parts(2);
  testing::RunRankThreads(2, [&](int r) {
    ShardedTrainOptions part = options;
    part.first_rank = r;
    part.local_ranks = 1;
    part.cpu_group = &group;
    parts[r] = TrainSharded(part, data);
  });
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE(::testing::Message() << "part " << r);
    EXPECT_EQ(parts[r].losses, whole.losses);
    for (const auto& [name, values] : whole.state) {
      if (name.starts_with("tables.")) {
        EXPECT_FALSE(parts[r].state.contains(name)) << name;
      } else {
        EXPECT_EQ(parts[r].state.at(name), values) << name;
      }
    }
  }

  ShardedTrainOptions alone = options;
  alone.first_rank = 1;
  alone.local_ranks = 1;
  EXPECT_EQ(testing::ErrorOf([&] { (void)TrainSharded(alone, data); }),
            "[TrainSharded] a process that runs part of the CPU ranks needs the shared cpu_group");
  alone.local_ranks = 2;
  EXPECT_EQ(testing::ErrorOf([&] { (void)TrainSharded(alone, data); }),
            "[TrainSharded] ranks 1 to 2 of a run of 2: outside the run");
}

// The NCCL communicator makes its all-reduce scratch from this count before
// the first collective; a count short of the bucket would grow it mid-run.
TEST(ShardedDlrmTest, AllReduceFloatsCountTheLossAndEveryDenseGradient) {
  auto engine = testing::NewEngine("NaiveEngine");
  InProcessCommunicatorGroup group(2);
  CollectiveOps collectives(*engine, group.communicator(0));
  ModelConfig config = Model(Optimizer::kAdam);
  config.bottom_mlp = {7, 5};
  config.top_mlp = {9};
  const ShardLayout layout(ParseShardPlan("0:0,1:1,2:0,3:1,4:1", 5, 2), config.tables(), 4);
  ShardedDlrm model(*engine, collectives, layout, 0, config);
  int64_t gradients = 0;
  model.dense().ForEachGradient(
      [&](const std::string&, Tensor& grad) { gradients += grad.numel(); });
  EXPECT_EQ(ShardedDlrm::AllReduceFloats(config), 1 + gradients);
  EXPECT_EQ(config.dense_parameters(), gradients);
}

TEST(ShardedDlrmErrors, RefusesWhatItCannotShard) {
  auto engine = testing::NewEngine("NaiveEngine");
  InProcessCommunicatorGroup group(2);
  CollectiveOps collectives(*engine, group.communicator(0));
  ModelConfig config = Model(Optimizer::kSgd);
  const ShardLayout layout(ParseShardPlan("0:0,1:1,2:0,3:1,4:1", 5, 2), config.tables(), 4);
  config.embedding_dtype = storage::DType::kF16;
  EXPECT_THAT(testing::ErrorOf([&] { ShardedDlrm(*engine, collectives, layout, 0, config); }),
              ::testing::HasSubstr("sharded tables are f32 with sum pooling"));
  config = Model(Optimizer::kSgd);
  config.table_rows.pop_back();
  EXPECT_THAT(testing::ErrorOf([&] { ShardedDlrm(*engine, collectives, layout, 0, config); }),
              ::testing::HasSubstr("the shard layout has 5 tables of 20 columns in all; the "
                                   "model 4 of 16"));
  ShardedDlrm model(*engine, collectives, layout, 0, Model(Optimizer::kSgd));
  SyntheticSource data(testing::TinyData(Model(Optimizer::kSgd), 6, kEndless));
  const HostBatch six = *data.Next(BatchMemory{engine.get()});
  EXPECT_EQ(testing::ErrorOf([&] { (void)SliceBatch(*engine, six, 0, 4); }),
            "[SliceBatch] rank 0 of 4: a batch of 6 examples splits into equal slices only over "
            "a number of ranks that divides it");
  ShardedBatch batch;
  EXPECT_THAT(testing::ErrorOf([&] { model.Upload(batch, SliceBatch(*engine, six, 1, 2)); }),
              ::testing::HasSubstr("[ShardedDlrm::Upload] rank 0: a local batch of 3 examples; "
                                   "the model takes 4 examples"));
}

}  // namespace
}  // namespace ember::train
