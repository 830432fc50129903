#include "tools/train/dist/sharded_trainer.h"

#include <chrono>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "engine/engine.h"
#include "engine/error.h"
#include "tools/train/dist/collective_ops.h"
#include "tools/train/dist/in_process_communicator.h"
#include "tools/train/dist/rank_threads.h"
#include "tools/train/dist/shard_layout.h"
#include "tools/train/dist/sharded_dlrm.h"

namespace ember::train {
namespace {

// What one rank ends with: the losses it read, its dense state, and its
// owned rows and their state in its own (owned tables') layout.
struct RankOutcome {
  std::vector<float> losses;
  int64_t examples = 0;
  double seconds = 0;
  ModelState dense;
  ModelState owned;
};

class RankRun {
 public:
  RankRun(const ShardedTrainOptions& options, const ShardLayout& layout, Communicator& comm,
          int rank)
      : options_(options),
        layout_(layout),
        rank_(rank),
        engine_(engine::CreateEngine(options.engine)),
        collectives_(*engine_, comm),
        model_(*engine_, collectives_, layout, rank, options.model, options.cache) {}

  RankOutcome Run(BatchSource& source, const std::function<void(int64_t, float)>& on_step) {
    model_.Initialize();
    RankOutcome out;
    const auto start = std::chrono::steady_clock::now();
    bool have = Upload(source, ring_[0], 0);
    int64_t step = 0;
    for (; have && (options_.steps == 0 || step < options_.steps); ++step) {
      ShardedBatch& cur = ring_[step % 2];
      ShardedBatch* next = &ring_[(step + 1) % 2];
      const bool more =
          (options_.steps == 0 || step + 1 < options_.steps) && Upload(source, *next, step + 1);
      PushShardedStep(options_.schedule, model_, cur, more ? next : nullptr);
      // The step before's loss, one step behind, so that the host wait
      // leaves this step's work in flight (its state is not written again
      // until the next step's forward).
      if (step > 0) Report(ring_[(step - 1) % 2], step - 1, out, on_step);
      out.examples += layout_.global_batch();
      have = more;
    }
    if (step > 0) Report(ring_[(step - 1) % 2], step - 1, out, on_step);
    engine_->WaitForAll();
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    Collect(out);
    return out;
  }

 private:
  bool Upload(BatchSource& source, ShardedBatch& batch, int64_t step) {
    const std::optional<HostBatch> global = source.Next(BatchMemory{engine_.get()});
    if (!global) return false;
    model_.Upload(batch, SliceBatch(*engine_, *global, rank_, layout_.ranks()));
    batch.state.step = step;
    return true;
  }

  void Report(const ShardedBatch& batch, int64_t step, RankOutcome& out,
              const std::function<void(int64_t, float)>& on_step) {
    out.losses.push_back(ReadFloats(model_.Loss(batch))[0]);
    if (rank_ == 0 && on_step) on_step(step, out.losses.back());
  }

  void Collect(RankOutcome& out) {
    model_.tbe().Flush();
    model_.dense().ForEachState(
        [&](const std::string& name, storage::Tensor& t) { out.dense[name] = ReadFloats(t); });
    ShardedTbe& tbe = model_.tbe();
    out.owned["tables.weights"] = ReadFloats(tbe.weights());
    const std::pair<const char*, const storage::Tensor*> states[] = {
        {"tables.accumulator", &tbe.accumulator()},
        {"tables.adam_m", &tbe.adam_m()},
        {"tables.adam_v", &tbe.adam_v()}};
    for (const auto& [name, tensor] : states) {
      if (*tensor) out.owned[name] = ReadFloats(*tensor);
    }
  }

  const ShardedTrainOptions& options_;
  const ShardLayout& layout_;
  const int rank_;
  std::unique_ptr<engine::Engine> engine_;
  CollectiveOps collectives_;
  ShardedDlrm model_;
  ShardedBatch ring_[2];
};

// Each owner's rows (and per-row or per-element state) at their place in
// the unsharded tables.
void PlaceOwnedState(const ShardLayout& layout, const ops::TbeTables& all,
                     const std::vector<RankOutcome>& ranks, ModelState& state) {
  for (const auto& [name, values] : ranks[0].owned) {
    const bool per_row = name == "tables.accumulator";
    std::vector<float>& whole = state[name];
    whole.assign(per_row ? all.total_rows() : all.total_elements(), 0.0f);
    for (int r = 0; r < layout.ranks(); ++r) {
      const ops::TbeTables owned = layout.OwnedTables(r);
      const std::vector<float>& mine = ranks[r].owned.at(name);
      for (int j = 0; j < owned.num_tables(); ++j) {
        const ShardLayout::Shard& shard = layout.shards(r)[j];
        const int64_t width = per_row ? 1 : owned.dim(j);
        const int64_t from = per_row ? owned.row_offset(j) : owned.weight_offset(j);
        const int64_t to =
            (per_row ? all.row_offset(shard.table) : all.weight_offset(shard.table)) +
            shard.row_begin * width;
        std::copy_n(mine.begin() + from, owned.rows(j) * width, whole.begin() + to);
      }
    }
  }
}

}  // namespace

ShardedTrainResult TrainSharded(const ShardedTrainOptions& options,
                                const std::function<std::unique_ptr<BatchSource>()>& data,
                                const std::function<void(int64_t, float)>& on_step) {
  const ops::TbeTables all = options.model.tables();
  const int ranks = options.plan.num_gpus;
  std::unique_ptr<BatchSource> first = data();
  if (first->batch_size() % ranks != 0) {
    throw InvalidArgument(
        fmt::format("[TrainSharded] a global batch of {} examples does not split over {} ranks",
                    first->batch_size(), ranks));
  }
  const ShardLayout layout(options.plan, all, first->batch_size() / ranks);
  InProcessCommunicatorGroup group(ranks);
  std::vector<RankOutcome> outcomes(ranks);
  RunOnRankThreads(
      ranks,
      [&](int r) {
        std::unique_ptr<BatchSource> source = r == 0 ? std::move(first) : data();
        RankRun run(options, layout, group.communicator(r), r);
        outcomes[r] = run.Run(*source, on_step);
      },
      [&](int r) {
        // The peers stop at their next collective instead of waiting for
        // this rank until their timeout.
        group.communicator(r).Break(fmt::format("rank {} stopped with an error", r));
      });
  for (int r = 1; r < ranks; ++r) {
    if (outcomes[r].dense != outcomes[0].dense) {
      throw Error(fmt::format(
          "[TrainSharded] rank {}'s dense parameters differ from rank 0's after the run: the "
          "replicas diverged",
          r));
    }
  }
  ShardedTrainResult result;
  result.losses = outcomes[0].losses;
  result.examples = outcomes[0].examples;
  result.seconds = outcomes[0].seconds;
  result.state = outcomes[0].dense;
  PlaceOwnedState(layout, all, outcomes, result.state);
  return result;
}

}  // namespace ember::train
