// ember-train: trains the DLRM-style model of the training runtime
// (tools/train/, library ember::train) on the engine chosen by ENGINE_TYPE,
// on the GPU when there is one, and prints its summary.
//
//   ember-train                                   # the embedded default
//   ember-train --schedule=fused --steps=2000 --eval_every=500
//   ember-train --compare --steps=300 --json=compare.json
//   ember-train --checkpoint_dir=ckpt --checkpoint_every=1000   # then --resume
//
// Flags are parsed into the library's option structs; every input is
// checked before any work starts (docs/train.md lists the checks). Sizes
// left unset come from a preset: a GPU-sized run when the device is a GPU,
// a CPU size that finishes in about a minute otherwise.
//
// Exit status: 0 when the run completed (or was stopped by Ctrl-C, which
// finishes the step in flight, checkpoints if asked and prints the
// summary); 1 when a step failed; 2 for bad input.

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/flags/usage.h>
#include <fmt/format.h>

#include "cache/cache_options.h"
#include "cache/cached_tbe.h"
#include "engine/base/device.h"
#include "engine/engine.h"
#include "engine/error.h"
#include "storage/storage.h"
#include "tools/train/checkpoint.h"
#include "tools/train/data_choice.h"
#include "tools/train/dist/kernel_loading.h"
#include "tools/train/dist/rendezvous.h"
#include "tools/train/dist/shard_planner.h"
#include "tools/train/dist/sharded_trainer.h"
#include "tools/train/model_state.h"
#include "tools/train/report.h"
#include "tools/train/runs.h"
#include "tools/train/tool_checks.h"

ABSL_FLAG(std::string, device, "auto",
          "auto (gpu:0 when there is a GPU, else cpu), cpu, gpu or gpu:N");
ABSL_FLAG(int64_t, tables, 8, "embedding tables (CPU preset 8, GPU preset 26)");
ABSL_FLAG(std::string, rows, "100000",
          "rows per table: one count for every table, or a comma-separated count per table "
          "(CPU preset 100000, GPU preset 1000000)");
ABSL_FLAG(int64_t, dim, 16, "embedding dimension of every table (CPU preset 16, GPU preset 64)");
ABSL_FLAG(int64_t, dense, 13, "dense features per example");
ABSL_FLAG(std::string, bottom_mlp, "64,32",
          "hidden widths of the bottom MLP (its last layer has --dim)");
ABSL_FLAG(std::string, top_mlp, "64,32", "hidden widths of the top MLP (its last layer has 1)");
ABSL_FLAG(int64_t, batch, 1024, "examples per batch (CPU preset 1024, GPU preset 8192)");
ABSL_FLAG(double, pooling, 2.0, "synthetic data: mean indices per bag (at most twice as many)");
ABSL_FLAG(std::string, pooling_mode, "sum", "how a bag's rows combine: sum or mean");
ABSL_FLAG(double, load_factor, 0.2, "rows the cache holds, as a fraction of all rows");
ABSL_FLAG(int64_t, cache_bytes, 0, "a byte budget for the cache instead of --load_factor");
ABSL_FLAG(int, prefetch_passes, 1, "multi-pass prefetch: passes over each batch's indices");
ABSL_FLAG(std::string, policy, "lru", "cache replacement: lru or lfu");
ABSL_FLAG(std::string, home, "auto",
          "where the rows live on a GPU: auto (managed memory when they fit in half the GPU's "
          "free memory, else host-mapped pinned memory), managed or mapped");
ABSL_FLAG(std::string, mapped_fills, "warps",
          "how a prefetch moves the rows of a host-mapped home: warps (the GPU's, zero-copy) or "
          "copy (the host gathers the new rows, a copy engine moves them in)");
ABSL_FLAG(int, fill_threads, 8, "--mapped_fills=copy: the host threads that move the rows");
ABSL_FLAG(std::string, dtype, "f32", "the tables' element type: f32, f16 or bf16");
ABSL_FLAG(std::string, optimizer, "adagrad",
          "sgd, adagrad (row-wise for the tables) or adam, for dense and embeddings alike");
ABSL_FLAG(double, lr, 0.05,
          "learning rate of the dense parameters (CPU preset 0.05, GPU preset 0.01)");
ABSL_FLAG(double, embedding_lr, 0.0, "learning rate of the tables (0: --lr)");
ABSL_FLAG(bool, tf32, false,
          "let the MLPs' matmuls use TF32 tensor cores on a GPU (faster; not bit-comparable "
          "with the CPU)");
ABSL_FLAG(int64_t, steps, 2500,
          "training steps (CPU preset 2500, GPU preset 3000); 0: until the data ends");
ABSL_FLAG(std::string, schedule, "prefetch",
          "push order of a step: baseline, prefetch, fused or semisync");
ABSL_FLAG(uint64_t, seed, 1, "seed of the initial weights and of the synthetic data");
ABSL_FLAG(std::string, data, "synthetic",
          "training data: synthetic, criteo:PATH[,PATH...] or criteo-bin:PATH[,PATH...]");
ABSL_FLAG(
    std::string, eval_data, "",
    "held-out data, as --data (default: synthetic data's own held-out stream; none for Criteo)");
ABSL_FLAG(int64_t, examples, 0, "synthetic training examples (0: no end; --steps ends the run)");
ABSL_FLAG(int64_t, eval_examples, 0, "synthetic held-out examples (0: 8 batches)");
ABSL_FLAG(int64_t, eval_every, 0,
          "evaluate on the held-out data every so many steps (0: at the end only)");
ABSL_FLAG(int64_t, eval_batches, 0, "batches per evaluation (0: all of the held-out data)");
ABSL_FLAG(int64_t, log_every, 0, "a progress line every so many steps (0: ten in the run)");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "directory of the checkpoint (written at the end and every --checkpoint_every steps)");
ABSL_FLAG(int64_t, checkpoint_every, 0, "checkpoint every so many steps (0: at the end only)");
ABSL_FLAG(bool, resume, false, "continue from the checkpoint in --checkpoint_dir");
ABSL_FLAG(std::string, trace, "",
          "write the engine's Chrome trace of a short run here (--trace_warmup + --trace_steps "
          "steps after the main run, on an engine of its own)");
ABSL_FLAG(int64_t, trace_steps, 10, "steps the trace analysis reads (--trace, --compare)");
ABSL_FLAG(int64_t, trace_warmup, 10, "steps the traced run makes first, left out of its analysis");
ABSL_FLAG(int64_t, warmup_steps, 10,
          "first steps left out of the summary's step times and examples/s (start-up: CUDA and "
          "cuBLAS handles, first allocations, an empty pipeline); their losses still count");
ABSL_FLAG(bool, compare, false,
          "run every schedule on the same data and print them side by side, with each one's "
          "bound and overlapped stages from its trace");
ABSL_FLAG(std::string, json, "", "write the summary (and comparison) as JSON here");
ABSL_FLAG(bool, deterministic, true, "ask for run-to-run identical embedding backward passes");
ABSL_FLAG(int, pipeline_depth, 3, "batches in flight");
ABSL_FLAG(
    int, loader_threads, 0,
    "threads making training batches (0: all the cores but four, at most 16; a text source gets "
    "one)");
ABSL_FLAG(int, loader_depth, 4, "training batches the loader makes ahead, beside one per thread");
ABSL_FLAG(bool, plan, false,
          "print how the tables would be sharded over --gpus GPUs (--sharding, --shard_plan, "
          "--gpu_memory) and exit");
ABSL_FLAG(int, gpus, 1, "GPUs to shard the tables over (--plan; --ranks trains on several)");
ABSL_FLAG(int, ranks, 1,
          "train sharded over this many ranks: GPUs 0..N-1 with NCCL on a GPU device, threads "
          "with an in-process communicator on the CPU (the same code path); the tables as "
          "--shard_plan or the planner places them, the dense part data-parallel");
ABSL_FLAG(bool, check_unsharded, false,
          "--ranks: then train one process on the same data, summing its dense gradients in "
          "rank-sized slices, and compare every value");
ABSL_FLAG(std::string, sharding, "auto", "the planner's policy: auto, table or row");
ABSL_FLAG(std::string, shard_plan, "",
          "a plan to check and print instead of the planner's: comma-separated 'table:gpu' or "
          "'table:row'");
ABSL_FLAG(int64_t, gpu_memory, 0,
          "bytes of each GPU that the tables' shards may use (--plan and --ranks; 0: the GPUs' "
          "free memory)");

namespace {

namespace fs = std::filesystem;
using ember::InvalidArgument;
using namespace ember::train;  // NOLINT: the tool is a thin layer over the runtime

// Ctrl-C: finish the step in flight, then stop; a second one kills.
std::atomic<bool> g_stop{false};
extern "C" void OnInterrupt(int) { g_stop.store(true); }

void InstallInterruptHandler() {
  struct sigaction action = {};
  action.sa_handler = OnInterrupt;
  action.sa_flags = SA_RESETHAND;  // the second signal takes the default action
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

// The flags named on the command line (this Abseil keeps its own record
// private): "--name", "--name=value", "-name", "--noname".
std::set<std::string, std::less<>> g_given;

void NoteGivenFlags(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') continue;
    arg.remove_prefix(arg[1] == '-' ? 2 : 1);
    const std::string_view name = arg.substr(0, arg.find('='));
    g_given.emplace(name);
    if (name.rfind("no", 0) == 0) g_given.emplace(name.substr(2));
  }
}

bool Given(std::string_view name) { return g_given.count(name) > 0; }

template <typename T>
T Preset(const absl::Flag<T>& flag, std::string_view name, bool gpu, T gpu_value) {
  return gpu && !Given(name) ? gpu_value : absl::GetFlag(flag);
}

[[noreturn]] void Bad(const std::string& what) { throw InvalidArgument(what); }

void CheckRange(std::string_view flag, double value, double lo, double hi) {
  if (!(value >= lo && value <= hi)) {
    Bad(fmt::format("--{}={} is out of range [{}, {}]", flag, value, lo, hi));
  }
}

std::vector<int64_t> ParseList(std::string_view flag, std::string_view text) {
  std::vector<int64_t> values;
  std::string_view rest = text;
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string part(rest.substr(0, comma));
    char* end = nullptr;
    errno = 0;
    const long long value = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end != 0 || errno != 0) {
      Bad(fmt::format("--{}='{}': '{}' is not a count", flag, text, part));
    }
    values.push_back(value);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return values;
}

ember::engine::Context ParseDevice(const std::string& text) {
  const int gpus = ember::GpuCount();
  if (text == "cpu") return ember::engine::Context::CPU();
  if (text == "auto")
    return gpus > 0 ? ember::engine::Context::GPU(0) : ember::engine::Context::CPU();
  int id = 0;
  if (text == "gpu" || text == "cuda") {
    id = 0;
  } else if (text.rfind("gpu:", 0) == 0 || text.rfind("cuda:", 0) == 0) {
    const std::string number = text.substr(text.find(':') + 1);
    char* end = nullptr;
    id = static_cast<int>(std::strtol(number.c_str(), &end, 10));
    if (number.empty() || *end != 0 || id < 0) {
      Bad(fmt::format("--device='{}' is not a device; valid: auto, cpu, gpu, gpu:N", text));
    }
  } else {
    Bad(fmt::format("--device='{}' is not a device; valid: auto, cpu, gpu, gpu:N", text));
  }
  if (id >= gpus) {
    Bad(fmt::format("--device={}: no such GPU; this machine has {} GPU(s){}", text, gpus,
                    gpus == 0 ? " (use --device=cpu)" : ""));
  }
  return ember::engine::Context::GPU(id);
}

ember::cache::HomeMemory ParseHome(const std::string& text) {
  if (text == "auto") return ember::cache::HomeMemory::kAuto;
  if (text == "managed") return ember::cache::HomeMemory::kManaged;
  if (text == "mapped") return ember::cache::HomeMemory::kMapped;
  Bad(fmt::format("--home='{}' is not auto, managed or mapped", text));
}

ember::cache::MappedFills ParseMappedFills(const std::string& text) {
  if (text == "warps") return ember::cache::MappedFills::kWarps;
  if (text == "copy") return ember::cache::MappedFills::kCopyEngine;
  Bad(fmt::format("--mapped_fills='{}' is not warps or copy", text));
}

ember::storage::DType ParseDType(const std::string& text) {
  if (text == "f32") return ember::storage::DType::kF32;
  if (text == "f16") return ember::storage::DType::kF16;
  if (text == "bf16") return ember::storage::DType::kBF16;
  Bad(fmt::format("--dtype='{}' is not f32, f16 or bf16", text));
}

int64_t PhysicalMemoryBytes() {
  return static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) *
         static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

struct Command {
  TrainOptions train;
  DataOptions data;
  ember::engine::EngineOptions engine;
  std::string trace;
  int64_t trace_steps = 0;
  int64_t trace_warmup = 0;
  int64_t warmup_steps = 0;
  bool compare = false;
  std::string json;
  // --plan: print the tables' shard plan instead of training.
  bool plan = false;
  int gpus = 1;
  ember::train::ShardPlannerOptions planner;
  std::string shard_plan;
  // --ranks: sharded training, on GPUs 0..N-1 or on the CPU; under
  // tools/train/launch.sh, this host's part of a run of `world` ranks.
  int ranks = 1;
  int world = 1;
  std::optional<ember::train::ProcessGroupEnv> hosts;
  ember::train::ShardedSchedule sharded_schedule = ember::train::ShardedSchedule::kSparseDist;
  bool check_unsharded = false;
};

// --plan and its inputs. --gpus only sizes the plan (--ranks trains), so
// more GPUs are refused without --plan rather than ignored.
void ReadPlanFlags(Command& c) {
  c.plan = absl::GetFlag(FLAGS_plan);
  c.gpus = absl::GetFlag(FLAGS_gpus);
  CheckRange("gpus", c.gpus, 1, 4096);
  if (c.gpus > 1 && !c.plan) {
    Bad(
        fmt::format("--gpus={}: --plan prints how the tables would be sharded over {} GPUs; "
                    "--ranks={} trains on them",
                    c.gpus, c.gpus, c.gpus));
  }
  c.planner.policy = ParseShardingPolicy(absl::GetFlag(FLAGS_sharding));
  c.shard_plan = absl::GetFlag(FLAGS_shard_plan);
  const int64_t memory = absl::GetFlag(FLAGS_gpu_memory);
  CheckRange("gpu_memory", static_cast<double>(memory), 0, 1ll << 50);
  if (!c.plan) return;
  if (memory == 0 && ember::GpuCount() == 0) {
    Bad("--plan on a machine without a GPU needs --gpu_memory (bytes each GPU may use)");
  }
  const double budget = memory > 0 ? static_cast<double>(memory)
                                   : static_cast<double>(ember::storage::DeviceFreeBytes(0));
  c.planner.gpu_budget_bytes.assign(c.gpus, budget);
}

// --ranks and what it needs: GPUs 0..N-1 and NCCL (on a GPU device), whole
// global batches, a sharded schedule, and none of the single-process
// run's extras (yet). Started by tools/train/launch.sh (EMBER_NUM_NODES
// set), this process is one host of several, its --ranks GPUs ranks
// node_rank * ranks onwards of nodes * ranks.
void ReadRankFlags(Command& c) {
  c.ranks = absl::GetFlag(FLAGS_ranks);
  CheckRange("ranks", c.ranks, 1, 1024);
  c.check_unsharded = absl::GetFlag(FLAGS_check_unsharded);
  const ember::engine::Context ctx = c.train.placement.ctx;
  if (std::getenv("EMBER_NUM_NODES") != nullptr) {
    c.hosts = ember::train::ProcessGroupFromEnv();
    if (!ctx.is_gpu()) Bad("a run of several hosts (tools/train/launch.sh) trains on GPUs");
    if (c.check_unsharded) {
      Bad("--check_unsharded compares one process's run: the tables of a run of several hosts "
          "live in their processes");
    }
  }
  c.world = c.ranks * (c.hosts ? c.hosts->num_nodes : 1);
  if (c.world == 1) {
    if (c.check_unsharded) Bad("--check_unsharded compares a run of --ranks=N (N > 1)");
    return;
  }
  if (ctx.is_gpu() && ctx.device_id != 0) {
    Bad(fmt::format("--ranks={} trains on GPUs 0..{}; --device={} names another first GPU", c.ranks,
                    c.ranks - 1, ctx.ToString()));
  }
  if (ctx.is_gpu() && c.ranks > ember::GpuCount()) {
    Bad(fmt::format("--ranks={} on GPUs: this machine has {} GPU(s)", c.ranks, ember::GpuCount()));
  }
  if (ctx.is_gpu() && !ember::train::NcclAvailable()) {
    Bad(fmt::format("--ranks={} on GPUs needs NCCL, which this build has not", c.ranks));
  }
  if (c.data.batch_size % c.world != 0) {
    Bad(fmt::format("--batch={} does not split over {} ranks{}", c.data.batch_size, c.world,
                    c.hosts ? " (--ranks on every host)" : ""));
  }
  if (c.plan || c.compare || !c.trace.empty() || !c.train.checkpoint_dir.empty() ||
      c.data.held_out.has_value() || c.train.eval_every > 0) {
    Bad("--ranks trains and reports the loss; it takes no --plan, --compare, --trace, "
        "--checkpoint_dir, --eval_data or --eval_every yet");
  }
  c.sharded_schedule = Given("schedule") ? ParseShardedSchedule(absl::GetFlag(FLAGS_schedule))
                                         : ember::train::ShardedSchedule::kSparseDist;
  // The planner's budget: --gpu_memory, else each GPU's free memory; host
  // memory does not bound a CPU rank. Every host of a run must make the
  // same plan (its collectives follow it), and free memory differs from
  // host to host: such a run takes --shard_plan or --gpu_memory.
  const int64_t memory = absl::GetFlag(FLAGS_gpu_memory);
  if (c.hosts && c.shard_plan.empty() && memory == 0) {
    Bad("a run of several hosts needs the same plan on every host: give --shard_plan, or "
        "--gpu_memory (each GPU's budget, the same on every host)");
  }
  c.planner.gpu_budget_bytes.clear();
  for (int r = 0; r < c.world; ++r) {
    const double free =
        ctx.is_gpu() ? static_cast<double>(ember::storage::DeviceFreeBytes(r % c.ranks)) : 1e18;
    c.planner.gpu_budget_bytes.push_back(memory > 0 ? static_cast<double>(memory) : free);
  }
}

// What the planner needs of each table: the bytes its cached rows keep on
// their GPU (the cache's load factor of each row and its slot state;
// rows and optimizer state stay in host-reachable memory) and its lookups.
std::vector<ShardingTable> ShardingTablesOf(const Command& c) {
  const ModelConfig& m = c.train.model;
  const ember::cache::CacheOptions& cache = c.train.placement.cache;
  const auto slot_bytes =
      static_cast<double>(ember::cache::CacheSlotBytes(m.embedding_dim, m.embedding_dtype));
  double rows = 0;
  for (int64_t r : m.table_rows) rows += static_cast<double>(r);
  const double load_factor =
      cache.cache_bytes > 0
          ? std::min(1.0, static_cast<double>(cache.cache_bytes) / (rows * slot_bytes))
          : cache.load_factor;
  const bool synthetic = c.data.train.kind == DataChoice::Kind::kSynthetic;
  std::vector<ShardingTable> tables;
  for (int64_t r : m.table_rows) {
    tables.push_back({.rows = r,
                      .dim = m.embedding_dim,
                      .resident_bytes_per_row = load_factor * slot_bytes,
                      .lookups_per_batch = (synthetic ? c.data.pooling : 1.0) *
                                           static_cast<double>(c.data.batch_size)});
  }
  return tables;
}

int PrintPlan(const Command& c) {
  const std::vector<ShardingTable> tables = ShardingTablesOf(c);
  const ShardPlan plan = c.shard_plan.empty()
                             ? PlanShards(tables, c.planner)
                             : ParseShardPlan(c.shard_plan, c.train.model.num_tables(), c.gpus);
  CheckShardPlan(plan, tables, c.planner.gpu_budget_bytes);
  std::printf("ember-train --plan: %s over %d GPU(s), %s\n", c.train.model.Describe().c_str(),
              c.gpus, c.shard_plan.empty() ? "the planner's plan" : "the given plan");
  std::printf("%s", DescribeShardPlan(plan, tables, c.planner.gpu_budget_bytes).c_str());
  return 0;
}

// One batch as the loader makes it and a step holds it: labels, dense
// features, and per table its offsets and indices (the synthetic data's
// mean pooling; a Criteo example has one index a table).
double BatchBytes(const Command& c) {
  const ModelConfig& m = c.train.model;
  const double pooling = c.data.train.kind == DataChoice::Kind::kSynthetic ? c.data.pooling : 1.0;
  const double example = 4.0 * static_cast<double>(1 + m.num_dense) +
                         8.0 * (1.0 + pooling) * static_cast<double>(m.num_tables());
  return example * static_cast<double>(c.data.batch_size);
}

// The memory a run cannot do without, checked before any work so that a
// typo in a shape or a budget fails at once (exit 2) rather than at an
// allocation minutes in. Host-reachable memory holds the tables' rows and
// optimizer state, and the loader's batches (its depth and one in the
// making); the device the dense parameters with their gradients and
// optimizer state, the pipeline's batches in flight, one batch's
// activations and their gradients, and the cache's slots (on the CPU the
// device is the host). A lower bound: the run needs more (the loader's
// other threads, the kernels' scratch, the pools' slack).
void CheckMemoryFits(const Command& c) {
  const TrainOptions& t = c.train;
  const ModelConfig& m = t.model;
  ember::cache::CacheOptions cache = t.placement.cache;
  cache.dtype = m.embedding_dtype;  // as the model makes its cache
  const ember::ops::TbeTables tbe = m.tables();
  const auto element = static_cast<double>(ember::storage::SizeOf(m.embedding_dtype));
  const double states = m.optimizer.kind == Optimizer::kAdam      ? 2
                        : m.optimizer.kind == Optimizer::kAdagrad ? 1
                                                                  : 0;
  const double rows = static_cast<double>(tbe.total_rows());
  const auto elements = static_cast<double>(tbe.total_elements());
  // Adam keeps two f32 moments an element, row-wise Adagrad one f32 a row.
  const double home = elements * element + (m.optimizer.kind == Optimizer::kAdam      ? 8 * elements
                                            : m.optimizer.kind == Optimizer::kAdagrad ? 4 * rows
                                                                                      : 0.0);
  const double cached =
      static_cast<double>(ember::cache::CacheSlotsFor(tbe, cache)) *
      static_cast<double>(ember::cache::CacheSlotBytes(m.embedding_dim, m.embedding_dtype));
  const double dense = static_cast<double>(m.dense_parameters()) * 4 * (2 + states);
  double widths = static_cast<double>(m.num_tables() + 1) * static_cast<double>(m.embedding_dim);
  for (const std::vector<int64_t>& sizes : {m.bottom_sizes(), m.top_sizes()}) {
    for (int64_t w : sizes) widths += static_cast<double>(w);
  }
  const double activations = 2 * 4 * widths * static_cast<double>(c.data.batch_size);
  const double batch = BatchBytes(c);
  const double loader = batch * (t.loader_depth + 1);
  const double in_flight = batch * t.pipeline_depth;
  const double device = dense + in_flight + activations + cached;
  const auto gib = [](double bytes) { return bytes / 1073741824.0; };
  const auto parts = fmt::format(
      "dense parameters, gradients and optimizer state {:.1f} GiB; {} batches in flight {:.1f} "
      "GiB; a batch's activations and gradients {:.1f} GiB; the cache {:.1f} GiB",
      gib(dense), t.pipeline_depth, gib(in_flight), gib(activations), gib(cached));
  const auto host = static_cast<double>(PhysicalMemoryBytes());
  const auto host_parts = fmt::format(
      "the tables' rows and optimizer state {:.1f} GiB; the loader's {} batches {:.1f} GiB",
      gib(home), t.loader_depth + 1, gib(loader));
  if (!t.placement.ctx.is_gpu()) {
    if (home + loader + device <= host) return;
    Bad(
        fmt::format("the run needs at least {:.1f} GiB of host memory ({}; {}); this machine has "
                    "{:.1f} GiB",
                    gib(home + loader + device), host_parts, parts, gib(host)));
  }
  if (home + loader > host) {
    Bad(
        fmt::format("the run needs at least {:.1f} GiB of host-reachable memory ({}); this "
                    "machine has {:.1f} GiB",
                    gib(home + loader), host_parts, gib(host)));
  }
  const auto free = static_cast<double>(ember::storage::DeviceFreeBytes(t.placement.ctx.device_id));
  if (device <= free) return;
  Bad(
      fmt::format("the run needs at least {:.1f} GiB of GPU memory ({}); GPU {} has {:.1f} GiB "
                  "free",
                  gib(device), parts, t.placement.ctx.device_id, gib(free)));
}

// Flags -> options, every value checked (docs/train.md, "Bad input").
Command FromFlags() {
  ember::tools::CheckEnvironment();
  Command c;
  c.engine = ember::engine::EngineOptions::FromEnv();
  TrainOptions& t = c.train;
  t.placement.ctx = ParseDevice(absl::GetFlag(FLAGS_device));
  const bool gpu = t.placement.ctx.is_gpu();

  ModelConfig& m = t.model;
  const int64_t tables = Preset(FLAGS_tables, "tables", gpu, int64_t{26});
  CheckRange("tables", static_cast<double>(tables), 1, 1024);
  m.table_rows = ParseList("rows", Preset(FLAGS_rows, "rows", gpu, std::string("1000000")));
  if (m.table_rows.size() == 1) {
    m.table_rows.assign(static_cast<std::size_t>(tables), m.table_rows[0]);
  } else if (Given("tables") && static_cast<int64_t>(m.table_rows.size()) != tables) {
    Bad(fmt::format("--rows lists {} tables but --tables={}", m.table_rows.size(), tables));
  }
  for (int64_t rows : m.table_rows) CheckRange("rows", static_cast<double>(rows), 1, 1ll << 40);
  m.embedding_dim = Preset(FLAGS_dim, "dim", gpu, int64_t{64});
  CheckRange("dim", static_cast<double>(m.embedding_dim), 1, 1024);
  m.num_dense = absl::GetFlag(FLAGS_dense);
  CheckRange("dense", static_cast<double>(m.num_dense), 1, 1 << 20);
  m.bottom_mlp =
      ParseList("bottom_mlp", Preset(FLAGS_bottom_mlp, "bottom_mlp", gpu, std::string("512,256")));
  m.top_mlp =
      ParseList("top_mlp", Preset(FLAGS_top_mlp, "top_mlp", gpu, std::string("1024,512,256")));
  const std::string pooling_mode = absl::GetFlag(FLAGS_pooling_mode);
  if (pooling_mode != "sum" && pooling_mode != "mean") {
    Bad(fmt::format("--pooling_mode='{}' is not sum or mean", pooling_mode));
  }
  m.pooling = pooling_mode == "mean" ? ember::ops::Pooling::kMean : ember::ops::Pooling::kSum;
  m.embedding_dtype = ParseDType(absl::GetFlag(FLAGS_dtype));
  m.optimizer.kind = ParseOptimizer(absl::GetFlag(FLAGS_optimizer));
  // The GPU preset's wider MLPs (1024 units) overshoot with Adagrad at the
  // CPU preset's 0.05 (the loss spikes over its first steps); 0.01 gave
  // held-out AUC 0.756 after 300 steps there against 0.720 after 3000.
  const double lr = Preset(FLAGS_lr, "lr", gpu, 0.01);
  // 0, given or not, means --lr (the flag's help says so).
  const double embedding_lr =
      absl::GetFlag(FLAGS_embedding_lr) != 0.0 ? absl::GetFlag(FLAGS_embedding_lr) : lr;
  CheckRange("lr", lr, 1e-12, 1e3);
  CheckRange("embedding_lr", embedding_lr, 1e-12, 1e3);
  m.optimizer.dense_lr = static_cast<float>(lr);
  m.optimizer.embedding_lr = static_cast<float>(embedding_lr);
  if (absl::GetFlag(FLAGS_tf32)) m.matmul_precision = ember::ops::MatmulPrecision::kTensorFloat32;
  m.seed = absl::GetFlag(FLAGS_seed);
  m.Validate();

  // The cache.
  ember::cache::CacheOptions& cache = t.placement.cache;
  cache.load_factor = absl::GetFlag(FLAGS_load_factor);
  CheckRange("load_factor", cache.load_factor, 1e-9, 1.0);
  cache.cache_bytes = absl::GetFlag(FLAGS_cache_bytes);
  const auto element = static_cast<int64_t>(ember::storage::SizeOf(m.embedding_dtype));
  const int64_t set_bytes =
      ember::cache::kCacheWays * ember::cache::CacheSlotBytes(m.embedding_dim, m.embedding_dtype);
  if (cache.cache_bytes < 0 || (cache.cache_bytes > 0 && cache.cache_bytes < set_bytes)) {
    Bad(
        fmt::format("--cache_bytes={} is smaller than one cache set: {} ways of a {}-byte row and "
                    "{} bytes of state need {} bytes",
                    cache.cache_bytes, ember::cache::kCacheWays, m.embedding_dim * element,
                    ember::cache::kCacheStateBytesPerSlot, set_bytes));
  }
  cache.prefetch_passes = absl::GetFlag(FLAGS_prefetch_passes);
  CheckRange("prefetch_passes", cache.prefetch_passes, 1, 1024);
  const std::string policy = absl::GetFlag(FLAGS_policy);
  if (policy != "lru" && policy != "lfu")
    Bad(fmt::format("--policy='{}' is not lru or lfu", policy));
  cache.policy =
      policy == "lfu" ? ember::cache::CachePolicy::kLfu : ember::cache::CachePolicy::kLru;
  cache.home = ParseHome(absl::GetFlag(FLAGS_home));
  cache.mapped_fills = ParseMappedFills(absl::GetFlag(FLAGS_mapped_fills));
  cache.fill_threads = absl::GetFlag(FLAGS_fill_threads);
  CheckRange("fill_threads", cache.fill_threads, 1, 64);
  t.placement.deterministic = absl::GetFlag(FLAGS_deterministic);

  // The run.
  // With --ranks the schedule is a sharded one (ReadRankFlags).
  if (absl::GetFlag(FLAGS_ranks) == 1) t.schedule = ParseSchedule(absl::GetFlag(FLAGS_schedule));
  t.steps = Preset(FLAGS_steps, "steps", gpu, int64_t{3000});
  CheckRange("steps", static_cast<double>(t.steps), 0, 1ll << 40);
  t.eval_every = absl::GetFlag(FLAGS_eval_every);
  CheckRange("eval_every", static_cast<double>(t.eval_every), 0, 1ll << 40);
  t.eval_batches = absl::GetFlag(FLAGS_eval_batches);
  CheckRange("eval_batches", static_cast<double>(t.eval_batches), 0, 1ll << 40);
  t.log_every = absl::GetFlag(FLAGS_log_every);
  CheckRange("log_every", static_cast<double>(t.log_every), 0, 1ll << 40);
  if (t.log_every == 0) t.log_every = std::max<int64_t>(1, t.steps / 10);
  t.pipeline_depth = absl::GetFlag(FLAGS_pipeline_depth);
  CheckRange("pipeline_depth", t.pipeline_depth, 2, 64);
  t.loader_threads = absl::GetFlag(FLAGS_loader_threads);
  CheckRange("loader_threads", t.loader_threads, 0, 256);
  t.loader_depth = absl::GetFlag(FLAGS_loader_depth);
  CheckRange("loader_depth", t.loader_depth, 1, 1024);
  t.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  t.checkpoint_every = absl::GetFlag(FLAGS_checkpoint_every);
  CheckRange("checkpoint_every", static_cast<double>(t.checkpoint_every), 0, 1ll << 40);
  t.resume = absl::GetFlag(FLAGS_resume);
  if ((t.checkpoint_every > 0 || t.resume) && t.checkpoint_dir.empty()) {
    Bad("--checkpoint_every and --resume need --checkpoint_dir");
  }
  ember::tools::CheckWritableDir("--checkpoint_dir", t.checkpoint_dir);
  if (t.resume && !fs::exists(CheckpointPath(t.checkpoint_dir))) {
    Bad(fmt::format("--resume: there is no checkpoint in '{}' (no {})", t.checkpoint_dir,
                    kCheckpointFileName));
  }

  // The data.
  DataOptions& d = c.data;
  d.train = ParseDataChoice("--data", absl::GetFlag(FLAGS_data));
  if (const std::string eval = absl::GetFlag(FLAGS_eval_data); !eval.empty()) {
    d.held_out = ParseDataChoice("--eval_data", eval);
  }
  d.batch_size = Preset(FLAGS_batch, "batch", gpu, int64_t{8192});
  CheckRange("batch", static_cast<double>(d.batch_size), 1, 1 << 24);
  d.seed = absl::GetFlag(FLAGS_seed);
  d.examples = absl::GetFlag(FLAGS_examples);
  CheckRange("examples", static_cast<double>(d.examples), 0, 1ll << 50);
  d.eval_examples = absl::GetFlag(FLAGS_eval_examples);
  CheckRange("eval_examples", static_cast<double>(d.eval_examples), 0, 1ll << 40);
  d.pooling = absl::GetFlag(FLAGS_pooling);
  // A bag holds up to twice the mean, and the TBE takes at most 65536.
  CheckRange("pooling", d.pooling, 1, 32768);

  // The outputs.
  c.trace = absl::GetFlag(FLAGS_trace);
  c.trace_steps = absl::GetFlag(FLAGS_trace_steps);
  CheckRange("trace_steps", static_cast<double>(c.trace_steps), 1, 100000);
  c.trace_warmup = absl::GetFlag(FLAGS_trace_warmup);
  CheckRange("trace_warmup", static_cast<double>(c.trace_warmup), 0, 100000);
  c.warmup_steps = absl::GetFlag(FLAGS_warmup_steps);
  CheckRange("warmup_steps", static_cast<double>(c.warmup_steps), 0, 100000);
  ember::tools::CheckWritableFile("--trace", c.trace);
  c.json = absl::GetFlag(FLAGS_json);
  ember::tools::CheckWritableFile("--json", c.json);
  c.compare = absl::GetFlag(FLAGS_compare);
  if (c.compare && (t.resume || !t.checkpoint_dir.empty())) {
    Bad("--compare runs every schedule from the start: it takes no --checkpoint_dir or --resume");
  }
  // The synthetic log is endless unless --examples bounds it.
  if (t.steps == 0 && d.train.kind == DataChoice::Kind::kSynthetic && d.examples == 0) {
    Bad(
        fmt::format("{} needs an end: --steps=0 trains until the data ends, and the synthetic "
                    "data has none without --examples",
                    c.compare ? "--compare" : "the run"));
  }
  if (t.eval_every > 0 && d.train.kind != DataChoice::Kind::kSynthetic && !d.held_out) {
    Bad(
        fmt::format("--eval_every={} needs held-out data: --eval_data (only the synthetic data "
                    "makes its own)",
                    t.eval_every));
  }
  ReadPlanFlags(c);
  ReadRankFlags(c);
  t.Validate();
  if (!c.plan) {  // a plan reads no data and allocates nothing
    CheckDataFiles(d, t.model);
    CheckMemoryFits(c);
  }
  return c;
}

// Where --compare puts each schedule's trace: beside --trace, else in a
// directory of this process's own in the temp directory (two runs at once
// must not read each other's traces).
fs::path TraceDir(const std::string& trace) {
  if (trace.empty()) {
    fs::path dir = fs::temp_directory_path() / fmt::format("ember-train-{}", ::getpid());
    fs::create_directories(dir);
    return dir;
  }
  const fs::path parent = fs::path(trace).parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

void WriteJson(const std::string& path, const Json& json) {
  if (path.empty()) return;
  std::ofstream out(path);
  out << json.Dump(2) << "\n";
  if (!out) throw ember::Error(fmt::format("--json '{}': the write failed", path));
}

// The unsharded twin of a --ranks run (--check_unsharded): one process, the
// same data, its dense gradients summed in rank-sized slices.
ember::train::ModelState TrainUnsharded(const Command& c, const DataFactory& data) {
  TrainOptions options = c.train;
  options.placement.dense_grad_slices = c.ranks;
  options.schedule = ember::train::SingleProcessTwin(c.sharded_schedule);
  options.log_every = 0;
  std::unique_ptr<ember::engine::Engine> engine = ember::engine::CreateEngine(c.engine);
  ember::train::Trainer trainer(*engine, options, data.train(), nullptr);
  trainer.Run();
  return ember::train::ReadModelState(trainer.model());
}

int RunSharded(const Command& c, const DataFactory& data) {
  const std::vector<ShardingTable> tables = ShardingTablesOf(c);
  ember::train::ShardedTrainOptions options;
  options.model = c.train.model;
  options.plan = c.shard_plan.empty()
                     ? PlanShards(tables, c.planner)
                     : ParseShardPlan(c.shard_plan, c.train.model.num_tables(), c.world);
  options.schedule = c.sharded_schedule;
  options.steps = c.train.steps;
  options.cache = c.train.placement.cache;
  options.engine = c.engine;
  options.gpus = c.train.placement.ctx.is_gpu();
  std::string where = options.gpus ? "GPUs (NCCL)" : "ranks on the CPU";
  if (c.hosts) {
    // This host's ranks, and the group's id from node 0 (rendezvous.h).
    options.first_rank = c.hosts->node_rank * c.ranks;
    options.local_ranks = c.ranks;
    options.nccl_id =
        ember::train::Rendezvous(*c.hosts, c.ranks, ember::train::NcclUniqueId::Create);
    where = fmt::format("GPUs (NCCL) on {} hosts, ranks {} to {} here", c.hosts->num_nodes,
                        options.first_rank, options.first_rank + c.ranks - 1);
  }
  std::printf("ember-train: %s\nsharded over %d %s, plan %s, %s schedule\n",
              c.train.model.Describe().c_str(), c.world, where.c_str(),
              FormatShardPlan(options.plan).c_str(),
              std::string(ToString(c.sharded_schedule)).c_str());
  const int64_t log_every = c.train.log_every;
  const ember::train::ShardedTrainResult result =
      ember::train::TrainSharded(options, data.train, [&](int64_t step, float loss) {
        if ((step + 1) % log_every != 0) return;
        std::printf("step %lld: loss %.6f\n", static_cast<long long>(step) + 1, loss);
        std::fflush(stdout);
      });
  std::printf("%zu steps, %lld examples in %.2f s: %.0f examples/s; last loss %.6f\n",
              result.losses.size(), static_cast<long long>(result.examples), result.seconds,
              static_cast<double>(result.examples) / std::max(result.seconds, 1e-9),
              result.losses.empty() ? 0.0 : result.losses.back());
  if (!c.check_unsharded) return 0;
  const ember::train::StateDifference diff =
      ember::train::CompareStates(result.state, TrainUnsharded(c, data));
  std::printf("against one process (dense gradients in %d slices): %s\n", c.ranks,
              diff.Describe().c_str());
  // Table-wise shards promise the same bits on the CPU; row-wise ones sum
  // partial sums in another order, and on GPUs the embedding backward sums
  // a row's gradient in chunks cut from the whole batch, which sharding
  // changes (docs/train.md, "Several GPUs"): float rounding, which
  // Adagrad's first steps can amplify.
  const bool row_wise = std::any_of(options.plan.tables.begin(), options.plan.tables.end(),
                                    [](const auto& t) { return t.kind == ShardKind::kRowWise; });
  if (options.gpus && !diff.identical()) {
    std::printf(
        "(on GPUs the values agree within float rounding, not bit for bit: "
        "docs/train.md, \"Several GPUs\")\n");
  }
  return diff.identical() || row_wise || options.gpus ? 0 : 1;
}

int Run(const Command& c) {
  if (c.plan) return PrintPlan(c);
  if (c.world > 1) return RunSharded(c, MakeDataFactory(c.data, c.train.model));
  const DataFactory data = MakeDataFactory(c.data, c.train.model);
  RunHooks hooks;
  hooks.stop = &g_stop;
  hooks.on_progress = [](const Progress& p) {
    std::printf("%s\n", FormatProgress(p).c_str());
    std::fflush(stdout);
  };
  hooks.on_eval = [](const EvalResult& r) {
    std::printf("%s\n", FormatEval(r).c_str());
    std::fflush(stdout);
  };
  hooks.on_checkpoint = [](const std::string& path, int64_t step) {
    std::printf("checkpoint after step %lld: %s\n", static_cast<long long>(step), path.c_str());
    std::fflush(stdout);
  };
  std::printf("ember-train: %s\n", c.train.model.Describe().c_str());
  Json json = Json::MakeObject();
  Json runs = Json::MakeArray();
  if (c.compare) {
    const CompareOptions compare{.train = c.train,
                                 .engine = c.engine,
                                 .warmup = c.warmup_steps,
                                 .trace_steps = c.trace_steps,
                                 .trace_warmup = c.trace_warmup,
                                 .trace_dir = TraceDir(c.trace)};
    const std::vector<RunReport> reports =
        CompareSchedules(compare, data, hooks, [](const RunReport& r) {
          std::printf("%s\n", FormatSummary(r).c_str());
          std::fflush(stdout);
        });
    std::printf("%s", FormatComparison(reports).c_str());
    for (const RunReport& r : reports) runs.Push(ToJson(r));
    json.Set("comparison", std::move(runs));
  } else {
    RunReport report;
    {
      std::unique_ptr<ember::engine::Engine> engine = ember::engine::CreateEngine(c.engine);
      std::printf("engine %s on %s, %s schedule\n", std::string(engine->name()).c_str(),
                  c.train.placement.ctx.ToString().c_str(),
                  std::string(ToString(c.train.schedule)).c_str());
      report = TrainAndReport(*engine, c.train, data, hooks, c.warmup_steps);
    }
    if (!c.trace.empty() && !g_stop.load()) {
      report.trace_path = c.trace;
      report.trace =
          TraceSteps(c.train, c.engine, c.trace, c.trace_steps, c.trace_warmup, data, &g_stop);
    }
    std::printf("%s", FormatSummary(report).c_str());
    runs.Push(ToJson(report));
    json.Set("run", runs.array()[0]);
  }
  WriteJson(c.json, json);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Trains a DLRM-style model with the cached TBE on the engine chosen by ENGINE_TYPE and "
      "prints its summary (docs/train.md).");
  NoteGivenFlags(argc, argv);
  absl::ParseCommandLine(argc, argv);
  // Before anything starts CUDA: several GPU ranks in this process need it.
  if (absl::GetFlag(FLAGS_ranks) > 1) PreferEagerKernelLoading();
  Command command;
  try {
    command = FromFlags();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ember-train: %s\n", e.what());
    return 2;
  }
  InstallInterruptHandler();
  try {
    return Run(command);
  } catch (const InvalidArgument& e) {
    std::fprintf(stderr, "ember-train: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ember-train: %s\n", e.what());
    return 1;
  }
}
