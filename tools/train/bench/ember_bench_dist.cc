// ember-bench-dist: sharded training (tools/train/dist/) on 1, 2, ... GPUs
// of this machine over NCCL, each GPU with an embedding cache of the same
// budget, on tables that do not fit one GPU's cache: examples/s beside one
// GPU's, and the step's pooled-rows all-to-all beside a raw NCCL
// all-to-all of the same bytes on the same communicators, both timed the
// same way (GPU events around the NCCL calls, NcclCommunicator's timings),
// in the same run.
//
//   ember-bench-dist --gpus=1,2 --tables=26 --rows=1000000 --batch=8192
//
// Each rank reads its own local batches (--batch examples per GPU: the
// global batch grows with the GPUs, as data-parallel training scales),
// --batches distinct ones made once and replayed (ReplaySource), so that
// no step waits for data; --cache_fraction sizes every GPU's cache as that
// share of all the tables' rows. Beside them, the best single-GPU
// configuration: the unsharded model (one process, no collectives) under
// the prefetch schedule with the same cache and batches. --cpu runs the
// ranks as CPU threads (an in-process communicator): a smoke test of the
// bench, not a measure.
//
// Exit status: 0 ran; 77 fewer GPUs than asked, or no NCCL; 2 bad input;
// 1 a failed run.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/flags/usage.h>
#include <fmt/format.h>

#include "cache/cache_options.h"
#include "engine/base/device.h"
#include "engine/engine.h"
#include "engine/engine_options.h"
#include "engine/error.h"
#include "storage/tensor.h"
#include "tools/train/bench/count_list.h"
#include "tools/train/bench/model_flags.h"
#include "tools/train/bench/replay_source.h"
#include "tools/train/data/synthetic_source.h"
#include "tools/train/dist/kernel_loading.h"
#include "tools/train/dist/shard_layout.h"
#include "tools/train/dist/shard_planner.h"
#include "tools/train/dist/sharded_dlrm.h"
#include "tools/train/dist/sharded_trainer.h"
#include "tools/train/json.h"
#include "tools/train/model_config.h"
#include "tools/train/tool_checks.h"
#include "tools/train/trainer.h"

ABSL_FLAG(std::string, gpus, "1,2", "GPU counts to run, each from GPU 0");
ABSL_FLAG(int64_t, tables, 26, "embedding tables");
ABSL_FLAG(int64_t, rows, 1000000, "rows per table");
ABSL_FLAG(int64_t, dim, 64, "embedding dimension");
ABSL_FLAG(int64_t, dense, 13, "dense features");
ABSL_FLAG(std::string, bottom_mlp, "512,256", "hidden widths of the bottom MLP");
ABSL_FLAG(std::string, top_mlp, "1024,512,256", "hidden widths of the top MLP");
ABSL_FLAG(int64_t, batch, 8192, "examples per GPU per step");
ABSL_FLAG(double, pooling, 2.0, "mean indices per bag");
ABSL_FLAG(std::string, optimizer, "adagrad", "sgd, adagrad or adam");
ABSL_FLAG(double, lr, 0.01, "learning rate");
ABSL_FLAG(bool, tf32, false,
          "let the MLPs' matmuls use TF32 tensor cores on a GPU (faster; not bit-comparable "
          "with the CPU)");
ABSL_FLAG(double, cache_fraction, 0.1,
          "each GPU's cache holds this share of all the tables' rows (its byte budget)");
ABSL_FLAG(std::string, schedule, "sparse-dist", "baseline, sparse-dist, fused or semisync");
ABSL_FLAG(int64_t, batches, 64, "distinct batches per rank, replayed");
ABSL_FLAG(int64_t, warmup, 64, "steps before the timed ones");
ABSL_FLAG(int64_t, steps, 128, "timed steps");
ABSL_FLAG(int, raw_repeat, 50, "raw all-to-alls timed after each run of 2+ GPUs");
ABSL_FLAG(std::string, json, "", "write the results as JSON here");
ABSL_FLAG(bool, unsharded, true, "also run the unsharded model on 1 GPU");
ABSL_FLAG(bool, cpu, false, "ranks as CPU threads: a smoke test of the bench, not a measure");

namespace {

using namespace ember::train;  // NOLINT: a bench over the runtime
using Clock = std::chrono::steady_clock;

struct Flags {
  std::vector<int64_t> gpus;
  ModelConfig model;
  int64_t batch = 0, batches = 0, warmup = 0, steps = 0;
  double pooling = 0, cache_fraction = 0;
  ShardedSchedule schedule = ShardedSchedule::kSparseDist;
  int raw_repeat = 0;
  bool cpu = false;
};

Flags ReadFlags() {
  Flags f;
  f.gpus = ParseCountList("gpus", absl::GetFlag(FLAGS_gpus));
  f.model = ModelFromFlags();
  f.batch = absl::GetFlag(FLAGS_batch);
  f.batches = absl::GetFlag(FLAGS_batches);
  f.warmup = absl::GetFlag(FLAGS_warmup);
  f.steps = absl::GetFlag(FLAGS_steps);
  f.pooling = absl::GetFlag(FLAGS_pooling);
  f.cache_fraction = absl::GetFlag(FLAGS_cache_fraction);
  f.schedule = ParseShardedSchedule(absl::GetFlag(FLAGS_schedule));
  f.raw_repeat = absl::GetFlag(FLAGS_raw_repeat);
  f.cpu = absl::GetFlag(FLAGS_cpu);
  if (f.batch < 1 || f.batches < 1 || f.warmup < 1 || f.steps < 2 || f.raw_repeat < 1 ||
      f.pooling < 1 || !(f.cache_fraction > 0 && f.cache_fraction <= 1)) {
    throw ember::InvalidArgument(
        "--batch, --batches, --warmup and --raw_repeat must be positive, --steps at least 2, "
        "--pooling at least 1 and --cache_fraction in (0, 1]");
  }
  return f;
}

// Every rank's local batches of `gpus` ranks: global batches of
// gpus * batch examples from one synthetic stream, sliced.
std::vector<std::shared_ptr<const std::vector<ReplaySource::Stored>>> MakeRankBatches(
    const Flags& f, int gpus) {
  SyntheticOptions synthetic;
  synthetic.batch_size = f.batch * gpus;
  synthetic.num_dense = static_cast<int>(f.model.num_dense);
  synthetic.rows = f.model.table_rows;
  synthetic.pooling_mean = f.pooling;
  synthetic.pooling_max = static_cast<int>(std::lround(2 * f.pooling));
  std::vector<std::vector<ReplaySource::Stored>> ranks(gpus);
  std::unique_ptr<ember::engine::Engine> engine = ember::engine::CreateEngine({});
  SyntheticSource source(synthetic);
  for (int64_t k = 0; k < f.batches; ++k) {
    const std::optional<HostBatch> global = source.Next({engine.get()});
    for (int r = 0; r < gpus; ++r) {
      ranks[r].push_back(ReplaySource::Store(SliceBatch(*engine, *global, r, gpus)));
    }
  }
  std::vector<std::shared_ptr<const std::vector<ReplaySource::Stored>>> out;
  out.reserve(ranks.size());
  for (auto& r : ranks) {
    out.push_back(std::make_shared<const std::vector<ReplaySource::Stored>>(std::move(r)));
  }
  return out;
}

// Table-wise shards balanced by the planner (equal tables: equal shares).
ShardPlan PlanFor(const Flags& f, int gpus) {
  std::vector<ShardingTable> tables;
  for (int64_t rows : f.model.table_rows) {
    tables.push_back({.rows = rows,
                      .dim = f.model.embedding_dim,
                      .resident_bytes_per_row = 1,
                      .lookups_per_batch = f.pooling * static_cast<double>(f.batch)});
  }
  return PlanShards(tables, {.gpu_budget_bytes = std::vector<double>(gpus, 1e18),
                             .policy = ShardingPolicy::kTableWise});
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The all-to-alls whose `what` starts with `prefix` (for a step's, from
// step `first_step` on): their median seconds and their bytes.
struct Series {
  int calls = 0;
  int64_t bytes = 0;
  double seconds = 0;
  [[nodiscard]] double gbps() const {
    return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0;
  }
};

Series SeriesOf(const std::vector<CollectiveTiming>& timings, std::string_view prefix,
                int64_t first_step) {
  Series s;
  std::vector<double> seconds;
  for (const CollectiveTiming& t : timings) {
    if (!t.what.starts_with(prefix)) continue;
    const std::string_view rest = std::string_view(t.what).substr(prefix.size());
    if (!rest.empty() && std::strtoll(std::string(rest).c_str(), nullptr, 10) < first_step) {
      continue;
    }
    seconds.push_back(t.seconds);
    s.bytes = t.bytes;
  }
  s.calls = static_cast<int>(seconds.size());
  s.seconds = Median(std::move(seconds));
  return s;
}

// Each collective's time on the rank that came to it last: the least
// over the ranks, call by call (the ranks issue the same calls in the same
// order). The other ranks' times include their wait for that one; its own
// is what the exchange itself took.
std::vector<CollectiveTiming> LastArrivals(
    const std::vector<std::vector<CollectiveTiming>>& ranks) {
  std::vector<CollectiveTiming> out = ranks.empty() ? std::vector<CollectiveTiming>{} : ranks[0];
  for (const std::vector<CollectiveTiming>& rank : ranks) {
    for (size_t k = 0; k < out.size() && k < rank.size(); ++k) {
      out[k].seconds = std::min(out[k].seconds, rank[k].seconds);
    }
  }
  return out;
}

struct RunResult {
  int gpus = 0;
  double examples_per_second = 0;
  double step_p50_ms = 0;
  double hit_rate = 0;
  float final_loss = 0;
  // The step's pooled rows on rank 0 (waits included) and on the rank that
  // came last; the gradients on rank 0; the raw ones on the last rank.
  Series pooled, pooled_last, grads, raw;
};

// Times `repeat` all-to-alls of the pooled rows' sizes on rank r's
// communicator (recorded in its timings as "raw pooled rows").
void TimeRawAllToAll(const ShardLayout& layout, int r, Communicator& comm, int repeat) {
  std::unique_ptr<ember::engine::Engine> engine =
      ember::engine::CreateEngine(ember::engine::ParseEngineType("NaiveEngine"));
  const std::vector<int64_t> sent = layout.PooledSent(r);
  const std::vector<int64_t> received = layout.PooledReceived();
  auto sum = [](const std::vector<int64_t>& v) {
    int64_t s = 0;
    for (int64_t x : v) s += x;
    return s;
  };
  const auto send = ember::storage::Tensor::Empty(*engine, {sum(sent)}, ember::storage::DType::kF32,
                                                  ember::engine::Context::GPU(r));
  const auto recv = ember::storage::Tensor::Empty(
      *engine, {sum(received)}, ember::storage::DType::kF32, ember::engine::Context::GPU(r));
  send.WaitToWrite();
  recv.WaitToWrite();
  for (int k = 0; k < repeat; ++k) {
    comm.AllToAllV<float>({send.data<float>(), static_cast<std::size_t>(send.numel())}, sent,
                          {recv.data<float>(), static_cast<std::size_t>(recv.numel())}, received,
                          "raw pooled rows");
  }
}

// Each GPU's cache budget: --cache_fraction of all the tables' rows.
double CacheBytes(const Flags& f) {
  int64_t rows = 0;
  for (int64_t r : f.model.table_rows) rows += r;
  return f.cache_fraction * static_cast<double>(rows) *
         static_cast<double>(
             ember::cache::CacheSlotBytes(f.model.embedding_dim, ember::storage::DType::kF32));
}

RunResult RunOn(const Flags& f, int gpus) {
  std::printf("[%d GPU(s)] making %lld batches of %lld examples...\n", gpus,
              static_cast<long long>(f.batches), static_cast<long long>(f.batch) * gpus);
  std::fflush(stdout);
  const auto batches = MakeRankBatches(f, gpus);
  ShardedTrainOptions options;
  options.model = f.model;
  options.plan = PlanFor(f, gpus);
  options.schedule = f.schedule;
  options.steps = f.warmup + f.steps;
  options.cache.emplace().cache_bytes = static_cast<int64_t>(CacheBytes(f));
  options.engine = ember::engine::EngineOptions::FromEnv();
  options.gpus = !f.cpu;
  options.nccl.record_timings = true;
  const ShardLayout layout(options.plan, f.model.tables(), f.batch);
  if (gpus > 1 && !f.cpu) {
    options.after_run = [&](int r, Communicator& comm) {
      TimeRawAllToAll(layout, r, comm, f.raw_repeat);
    };
  }
  std::vector<Clock::time_point> reported(options.steps);
  const DataSpec spec{static_cast<int>(f.model.num_dense), f.model.table_rows};
  std::printf("[%d GPU(s)] training %lld + %lld steps, plan %s...\n", gpus,
              static_cast<long long>(f.warmup), static_cast<long long>(f.steps),
              FormatShardPlan(options.plan).c_str());
  std::fflush(stdout);
  const ShardedTrainResult result = TrainShardedOnRankData(
      options, [&](int r) { return std::make_unique<ReplaySource>(spec, f.batch, batches[r]); },
      [&](int64_t step, float) { reported[step] = Clock::now(); });

  RunResult out;
  out.gpus = gpus;
  std::vector<double> step_ms;
  for (int64_t s = f.warmup; s < options.steps; ++s) {
    step_ms.push_back(
        std::chrono::duration<double, std::milli>(reported[s] - reported[s - 1]).count());
  }
  const double seconds =
      std::chrono::duration<double>(reported.back() - reported[f.warmup - 1]).count();
  out.examples_per_second = static_cast<double>(f.steps * f.batch * gpus) / seconds;
  out.step_p50_ms = Median(step_ms);
  int64_t unique = 0, misses = 0;
  for (const ember::cache::CacheCounts& c : result.cache_totals) {
    unique += c.unique;
    misses += c.unique_misses;
  }
  out.hit_rate = unique > 0 ? 1.0 - static_cast<double>(misses) / static_cast<double>(unique) : 0;
  out.final_loss = result.losses.empty() ? 0.0f : result.losses.back();
  const std::vector<CollectiveTiming>& first = result.timings.at(0);
  const std::vector<CollectiveTiming> last = LastArrivals(result.timings);
  out.pooled = SeriesOf(first, "pooled rows of step ", f.warmup);
  out.pooled_last = SeriesOf(last, "pooled rows of step ", f.warmup);
  out.grads = SeriesOf(first, "gradients of step ", f.warmup);
  out.raw = SeriesOf(last, "raw pooled rows", 0);
  std::printf("[%d GPU(s)] %.0f examples/s\n", gpus, out.examples_per_second);
  std::fflush(stdout);
  return out;
}

// The best single-GPU configuration beside the sharded runs: one process,
// the unsharded model (DlrmModel) under the prefetch schedule, the same
// cache budget and batches as the sharded run on 1 GPU.
double RunUnsharded(const Flags& f, double cache_bytes) {
  std::printf("[1 GPU, unsharded] training %lld + %lld steps...\n",
              static_cast<long long>(f.warmup), static_cast<long long>(f.steps));
  std::fflush(stdout);
  const auto batches = MakeRankBatches(f, 1);
  TrainOptions options;
  options.model = f.model;
  options.placement.ctx = f.cpu ? ember::engine::Context::CPU() : ember::engine::Context::GPU(0);
  options.placement.cache.cache_bytes = static_cast<int64_t>(cache_bytes);
  options.schedule = Schedule::kPrefetch;
  options.steps = f.warmup + f.steps;
  const DataSpec spec{static_cast<int>(f.model.num_dense), f.model.table_rows};
  std::unique_ptr<ember::engine::Engine> engine =
      ember::engine::CreateEngine(ember::engine::EngineOptions::FromEnv());
  Trainer trainer(*engine, options, std::make_unique<ReplaySource>(spec, f.batch, batches[0]),
                  nullptr);
  const TrainResult result = trainer.Run();
  const std::vector<StepRecord> timed(result.records.begin() + f.warmup, result.records.end());
  const double rate = Summarize(timed).examples_per_second;
  std::printf("[1 GPU, unsharded] %.0f examples/s\n", rate);
  std::fflush(stdout);
  return rate;
}

ember::train::Json ToJson(const Series& s) {
  return ember::train::Json::MakeObject()
      .Set("calls", static_cast<int64_t>(s.calls))
      .Set("bytes", s.bytes)
      .Set("median_seconds", s.seconds)
      .Set("gb_per_second", s.gbps());
}

std::string EngineName(const ember::engine::EngineOptions& options) {
  return std::string(ToString(options.type)) + (options.async_gpu ? "Async" : "");
}

int Run() {
  ember::tools::CheckEnvironment();
  ember::tools::CheckWritableFile("--json", absl::GetFlag(FLAGS_json));
  const Flags f = ReadFlags();
  const int most = static_cast<int>(*std::max_element(f.gpus.begin(), f.gpus.end()));
  if (!f.cpu && (!NcclAvailable() || ember::GpuCount() < most)) {
    std::printf(
        "ember-bench-dist: needs NCCL and %d GPU(s); this build %s NCCL and this machine "
        "has %d GPU(s) (skipped)\n",
        most, NcclAvailable() ? "has" : "has no", ember::GpuCount());
    return 77;
  }
  std::printf(
      "ember-bench-dist: %s, %lld examples per GPU, cache %.0f%% of the rows per GPU, "
      "%s schedule, engine %s\n",
      f.model.Describe().c_str(), static_cast<long long>(f.batch), 100 * f.cache_fraction,
      std::string(ToString(f.schedule)).c_str(),
      EngineName(ember::engine::EngineOptions::FromEnv()).c_str());
  std::vector<RunResult> runs;
  for (int64_t g : f.gpus) runs.push_back(RunOn(f, static_cast<int>(g)));
  const double unsharded = absl::GetFlag(FLAGS_unsharded) ? RunUnsharded(f, CacheBytes(f)) : 0;

  std::string table =
      fmt::format("{:<5} {:>12} {:>12} {:>12} {:>10} {:>11} {:>8}\n", "GPUs", "global batch",
                  "step P50 ms", "examples/s", "vs first", "cache hit", "loss");
  ember::train::Json json_runs = ember::train::Json::MakeArray();
  for (const RunResult& r : runs) {
    table += fmt::format("{:<5} {:>12} {:>12.3f} {:>12.0f} {:>9.2f}x {:>10.1f}% {:>8.4f}\n", r.gpus,
                         f.batch * r.gpus, r.step_p50_ms, r.examples_per_second,
                         r.examples_per_second / runs[0].examples_per_second, 100 * r.hit_rate,
                         r.final_loss);
    json_runs.Push(ember::train::Json::MakeObject()
                       .Set("gpus", static_cast<int64_t>(r.gpus))
                       .Set("examples_per_second", r.examples_per_second)
                       .Set("step_p50_ms", r.step_p50_ms)
                       .Set("cache_hit_rate", r.hit_rate)
                       .Set("final_loss", static_cast<double>(r.final_loss))
                       .Set("pooled_all_to_all", ToJson(r.pooled))
                       .Set("pooled_all_to_all_last_rank", ToJson(r.pooled_last))
                       .Set("gradients_all_to_all", ToJson(r.grads))
                       .Set("raw_all_to_all", ToJson(r.raw)));
    if (r.raw.calls == 0) continue;
    table += fmt::format(
        "  {} GPUs, pooled rows all-to-all ({:.2f} MB to the other ranks), in the step: {:.1f} "
        "GB/s on rank 0, {:.1f} GB/s on the rank that came last (medians of {}); raw NCCL "
        "{:.1f} GB/s (median of {}): {:.1f}% and {:.1f}%\n",
        r.gpus, static_cast<double>(r.pooled.bytes) / 1e6, r.pooled.gbps(), r.pooled_last.gbps(),
        r.pooled.calls, r.raw.gbps(), r.raw.calls, 100 * r.pooled.gbps() / r.raw.gbps(),
        100 * r.pooled_last.gbps() / r.raw.gbps());
    table +=
        fmt::format("  {} GPUs, gradients all-to-all: in the step {:.1f} GB/s (median of {})\n",
                    r.gpus, r.grads.gbps(), r.grads.calls);
  }
  if (unsharded > 0) {
    table +=
        fmt::format("1 GPU, unsharded model (prefetch schedule): {:.0f} examples/s\n", unsharded);
  }
  for (const RunResult& r : runs) {
    if (r.gpus > 1 && unsharded > 0) {
      table += fmt::format("  {} GPUs / 1 GPU unsharded: {:.2f}x\n", r.gpus,
                           r.examples_per_second / unsharded);
    }
  }
  std::printf("%s", table.c_str());
  std::printf(
      "timings: GPU events around each NCCL call (NcclCommunicator); rank 0's include its "
      "wait for a rank that comes later, the last rank's (the least over the ranks, call by "
      "call) are the exchange's own; raw: the same sizes on the same communicators after the "
      "run, on the last rank\n");
  if (const std::string path = absl::GetFlag(FLAGS_json); !path.empty()) {
    std::ofstream(path) << ember::train::Json::MakeObject()
                               .Set("model", f.model.Describe())
                               .Set("batch_per_gpu", f.batch)
                               .Set("cache_fraction", f.cache_fraction)
                               .Set("schedule", std::string(ToString(f.schedule)))
                               .Set("unsharded_examples_per_second", unsharded)
                               .Set("runs", std::move(json_runs))
                               .Dump(2)
                        << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Times sharded DLRM training on 1, 2, ... GPUs over NCCL, and its all-to-all beside a raw "
      "one.");
  absl::ParseCommandLine(argc, argv);
  // Before anything starts CUDA (the 1-GPU runs load the same way).
  ember::train::PreferEagerKernelLoading();
  try {
    return Run();
  } catch (const ember::InvalidArgument& e) {
    std::fprintf(stderr, "ember-bench-dist: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ember-bench-dist: %s\n", e.what());
    return 1;
  }
}
