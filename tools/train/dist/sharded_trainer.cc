#include "tools/train/dist/sharded_trainer.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "engine/base/device.h"
#include "engine/base/logging.h"
#include "engine/engine.h"
#include "engine/error.h"
#include "tools/train/data/loader.h"
#include "tools/train/dist/collective_ops.h"
#include "tools/train/dist/in_process_communicator.h"
#include "tools/train/dist/kernel_loading.h"
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
  std::vector<CollectiveTiming> timings;
  std::optional<cache::CacheCounts> cache;
};

// A rank's engine: on GPUs one more GPU worker than asked, since a
// collective holds the worker that runs it until NCCL has finished (the
// rank's communication worker), and the compute keeps the others; and at
// least two CPU workers, since the input's packing (batch i+2) and
// unpacking (batch i+1) are CPU ops of a millisecond or more each, pushed
// in one step, which one worker would run one after the other. Its pinned
// memory is fenced on, and pooled for, its own GPU `gpu`: with GPU 0 for
// every rank, each rank's engine ran ops on GPU 0 and waited for the
// others' fences, which can sit behind their collectives. Where a
// profile is asked for, each rank writes its own (PATH.rankR.json): the
// ranks' engines live in one process and would otherwise write one file.
engine::EngineOptions RankEngine(const ShardedTrainOptions& options, int rank, int gpu) {
  engine::EngineOptions engine = options.engine;
  if (options.gpus) {
    engine.gpu_workers += 1;
    engine.cpu_workers = std::max(engine.cpu_workers, 2);
    engine.host_memory_gpu = gpu;
  }
  if (!engine.profile_path.empty()) {
    engine.profile_path = fmt::format("{}.rank{}.json", engine.profile_path, rank);
  }
  return engine;
}

// Each rank's loader threads: on GPUs the machine's share of each of the
// process's ranks (a synthetic GPU-preset batch of 8192 examples costs a
// core about 16 ms, where a step takes 3.5); on the CPU one (the ranks'
// ops need the cores). A source that does not fork gets one.
int LoaderThreads(const ShardedTrainOptions& options, int local_ranks) {
  return options.gpus ? DefaultLoaderThreads(local_ranks) : 1;
}

class RankRun {
 public:
  // Global rank `rank`, on this process's GPU `gpu` (on GPUs); `reports`:
  // this thread calls on_step.
  RankRun(const ShardedTrainOptions& options, const ShardLayout& layout, Communicator& comm,
          int rank, int gpu, bool reports)
      : options_(options),
        layout_(layout),
        reports_(reports),
        engine_(engine::CreateEngine(RankEngine(options, rank, gpu))),
        collectives_(*engine_, comm,
                     options.gpus ? engine::Context::GPU(gpu) : engine::Context::CPU()),
        model_(*engine_, collectives_, layout, rank, options.model, options.cache) {}

  // `loader_threads` make the batches ahead (see LoaderThreads).
  RankOutcome Run(std::unique_ptr<BatchSource> data, int loader_threads,
                  const std::function<void(int64_t, float)>& on_step) {
    // Batches are made ahead, in pinned memory where they go to a GPU, so
    // that this thread only pushes.
    Loader source(
        *engine_, std::move(data),
        {.depth = 3,
         .threads = loader_threads,
         .kind = options_.gpus ? storage::MemoryKind::kPinned : storage::MemoryKind::kCpu});
    model_.Initialize();
    RankOutcome out;
    const auto start = std::chrono::steady_clock::now();
    // Batches i+1 and i+2 are uploaded while step i is pushed (the
    // schedules send i+2's lengths ahead); the slot of batch i+2 is that
    // of batch i-2, reported a step ago.
    auto wanted = [&](int64_t step) { return options_.steps == 0 || step < options_.steps; };
    bool have = Upload(source, Slot(0), 0);
    bool have_next = have && wanted(1) && Upload(source, Slot(1), 1);
    // No rank issues a step's collective before every rank made its memory
    // (model, cache, the first batches): in a process that drives several
    // GPUs an allocation beside a peer's spinning collective can wait for
    // it under the driver's lock (docs/train.md, "Several GPUs").
    collectives_.Barrier("setup");
    engine_->WaitForAll();
    int64_t step = 0;
    for (; have && wanted(step); ++step) {
      const bool have_after =
          have_next && wanted(step + 2) && Upload(source, Slot(step + 2), step + 2);
      PushShardedStep(options_.schedule, model_, Slot(step), have_next ? &Slot(step + 1) : nullptr,
                      have_after ? &Slot(step + 2) : nullptr);
      // The step before's loss, one step behind, so that the host wait
      // leaves this step's work in flight.
      if (step > 0) Report(Slot(step - 1), step - 1, out, on_step);
      out.examples += layout_.global_batch();
      have = have_next;
      have_next = have_after;
    }
    if (step > 0) Report(Slot(step - 1), step - 1, out, on_step);
    engine_->WaitForAll();
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    Collect(out);
    return out;
  }

 private:
  bool Upload(Loader& source, ShardedBatch& batch, int64_t step) {
    std::optional<HostBatch> local = source.Pop();
    if (!local) return false;
    model_.Upload(batch, std::move(*local));
    batch.state.step = step;
    return true;
  }

  void Report(const ShardedBatch& batch, int64_t step, RankOutcome& out,
              const std::function<void(int64_t, float)>& on_step) {
    out.losses.push_back(ReadFloats(model_.Loss(batch))[0]);
    if (reports_ && on_step) on_step(step, out.losses.back());
  }

  void Collect(RankOutcome& out) {
    if (cache::CachedTbe* cache = model_.tbe().cache()) out.cache = cache->TotalStats().all;
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

  // Batches in the ring: the one pushed, one reported behind it, two
  // uploaded ahead.
  static constexpr int64_t kRing = 4;
  ShardedBatch& Slot(int64_t step) { return ring_[step % kRing]; }

  const ShardedTrainOptions& options_;
  const ShardLayout& layout_;
  const bool reports_;
  std::unique_ptr<engine::Engine> engine_;
  CollectiveOps collectives_;
  ShardedDlrm model_;
  ShardedBatch ring_[kRing];
};

// Each owner's rows (and per-row or per-element state) at their place in
// the unsharded tables.
// REQUIRES: `ranks` holds every rank's outcome.
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

// Rank r's slices of the global batches of `global` (SliceBatch).
class SliceSource final : public BatchSource {
 public:
  SliceSource(std::unique_ptr<BatchSource> global, int rank, int ranks)
      : BatchSource(global->batch_size() / ranks),
        global_(std::move(global)),
        rank_(rank),
        ranks_(ranks) {}

  [[nodiscard]] const DataSpec& spec() const override { return global_->spec(); }
  [[nodiscard]] int64_t position() const override { return global_->position(); }
  [[nodiscard]] std::optional<int64_t> size() const override { return global_->size(); }
  void Seek(int64_t example) override { global_->Seek(example); }

  // A short last batch (the data's end) is dropped, as TorchRec's
  // drop_last does: a sharded step exchanges whole local batches. Every
  // rank reads the same global batches, so all drop it at the same step.
  std::optional<HostBatch> Next(const BatchMemory& memory) override {
    const std::optional<HostBatch> global = global_->Next(memory);
    if (!global) return std::nullopt;
    if (global->batch_size < global_->batch_size()) {
      if (rank_ == 0) {
        Log().warn(
            "[TrainSharded] the data's last batch holds {} of {} examples: dropped (a "
            "sharded step takes whole batches)",
            global->batch_size, global_->batch_size());
      }
      return std::nullopt;
    }
    return SliceBatch(*memory.engine, *global, rank_, ranks_);
  }

 private:
  std::unique_ptr<BatchSource> global_;
  const int rank_;
  const int ranks_;
};

// This process's ranks: [first, first + count).
struct LocalRanks {
  int first = 0;
  int count = 0;
};

LocalRanks LocalRanksOf(const ShardedTrainOptions& options) {
  const int ranks = options.plan.num_gpus;
  const LocalRanks local{options.first_rank, options.local_ranks > 0 ? options.local_ranks : ranks};
  if (local.first < 0 || local.first + local.count > ranks) {
    throw InvalidArgument(
        fmt::format("[TrainSharded] ranks {} to {} of a run of {}: outside the run", local.first,
                    local.first + local.count - 1, ranks));
  }
  const bool part = local.count < ranks;
  if (part && options.gpus && !options.nccl_id) {
    throw InvalidArgument(
        "[TrainSharded] a process that runs part of the ranks needs the group's NCCL id "
        "(nccl_id, from the rendezvous)");
  }
  if (part && !options.gpus && options.cpu_group == nullptr) {
    throw InvalidArgument(
        "[TrainSharded] a process that runs part of the CPU ranks needs the shared cpu_group");
  }
  if (options.gpus && !NcclAvailable()) {
    throw Unavailable("[TrainSharded] training on GPUs needs NCCL, which this build has not");
  }
  if (options.gpus && local.count > GpuCount()) {
    throw InvalidArgument(fmt::format(
        "[TrainSharded] {} ranks on this machine's GPUs, but it has {}", local.count, GpuCount()));
  }
  if (options.gpus) CheckKernelLoading(local.count, CudaLoadsKernelsLazily());
  return local;
}

}  // namespace

ShardedTrainResult TrainSharded(const ShardedTrainOptions& options,
                                const std::function<std::unique_ptr<BatchSource>()>& data,
                                const std::function<void(int64_t, float)>& on_step) {
  const int ranks = options.plan.num_gpus;
  std::unique_ptr<BatchSource> first = data();
  if (first->batch_size() % ranks != 0) {
    throw InvalidArgument(
        fmt::format("[TrainSharded] a global batch of {} examples does not split over {} ranks",
                    first->batch_size(), ranks));
  }
  return TrainShardedOnRankData(
      options,
      [&](int r) -> std::unique_ptr<BatchSource> {
        std::unique_ptr<BatchSource> global = r == 0 ? std::move(first) : data();
        // A source that can make only this rank's examples does (the
        // synthetic one: 1/ranks of the work), else each rank slices
        // every whole batch.
        if (std::unique_ptr<BatchSource> slice = global->Slice(r, ranks)) return slice;
        return std::make_unique<SliceSource>(std::move(global), r, ranks);
      },
      on_step);
}

ShardedTrainResult TrainShardedOnRankData(
    const ShardedTrainOptions& options,
    const std::function<std::unique_ptr<BatchSource>(int rank)>& rank_data,
    const std::function<void(int64_t, float)>& on_step) {
  const ops::TbeTables all = options.model.tables();
  const int ranks = options.plan.num_gpus;
  const LocalRanks local = LocalRanksOf(options);
  if (options.gpus) LoadLibraryKernels(local.count);  // before any rank's first collective
  std::vector<std::unique_ptr<BatchSource>> sources(local.count);
  for (int l = 0; l < local.count; ++l) {
    sources[l] = rank_data(local.first + l);
    if (sources[l]->batch_size() != sources[0]->batch_size()) {
      throw InvalidArgument(fmt::format(
          "[TrainShardedOnRankData] rank {}'s batches have {} examples, rank {}'s {}: the ranks "
          "must read local batches of one size",
          local.first + l, sources[l]->batch_size(), local.first, sources[0]->batch_size()));
    }
  }
  const ShardLayout layout(options.plan, all, sources[0]->batch_size());
  const NcclUniqueId id = !options.gpus     ? NcclUniqueId{}
                          : options.nccl_id ? *options.nccl_id
                                            : NcclUniqueId::Create();
  std::optional<InProcessCommunicatorGroup> own_group;
  if (!options.gpus && options.cpu_group == nullptr) own_group.emplace(ranks);
  InProcessCommunicatorGroup* group = options.cpu_group ? options.cpu_group : &*own_group;
  std::vector<RankOutcome> outcomes(local.count);
  RunOnRankThreads(local.count, [&](int l) {
    const int r = local.first + l;
    std::unique_ptr<NcclCommunicator> nccl;
    if (options.gpus) {
      NcclCommunicatorOptions nccl_options = options.nccl;
      nccl_options.all_reduce_floats =
          std::max(nccl_options.all_reduce_floats, ShardedDlrm::AllReduceFloats(options.model));
      nccl = std::make_unique<NcclCommunicator>(r, ranks, l, id, nccl_options);
    }
    Communicator& comm = nccl ? *nccl : group->communicator(r);
    try {
      RankRun run(options, layout, comm, r, l, /*reports=*/l == 0);
      outcomes[l] = run.Run(std::move(sources[l]), LoaderThreads(options, local.count), on_step);
    } catch (...) {
      // The peers stop at their next collective instead of waiting for
      // this rank (NCCL's: at that collective's timeout).
      comm.Break(fmt::format("rank {} stopped with an error", r));
      throw;
    }
    if (options.after_run) options.after_run(r, comm);
    if (nccl) outcomes[l].timings = nccl->timings();
  });
  for (int l = 1; l < local.count; ++l) {
    if (outcomes[l].dense != outcomes[0].dense) {
      throw Error(fmt::format(
          "[TrainSharded] rank {}'s dense parameters differ from rank {}'s after the run: the "
          "replicas diverged",
          local.first + l, local.first));
    }
  }
  ShardedTrainResult result;
  result.losses = outcomes[0].losses;
  result.examples = outcomes[0].examples;
  result.seconds = outcomes[0].seconds;
  result.state = outcomes[0].dense;
  for (RankOutcome& o : outcomes) result.timings.push_back(std::move(o.timings));
  for (const RankOutcome& o : outcomes) {
    if (o.cache) result.cache_totals.push_back(*o.cache);
  }
  // The tables' state where this process holds every shard.
  if (local.count == ranks) PlaceOwnedState(layout, all, outcomes, result.state);
  return result;
}

}  // namespace ember::train
