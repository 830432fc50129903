// The GPU cases (see gpu_cases.h). Each case has an engine side and a
// hand-written side that issue the same kernels in the same order; each side
// is timed from its first push or launch until the GPU is done (WaitForAll,
// which synchronizes the engine's streams, or cudaDeviceSynchronize).
//
// Everything runs in the bench's own process: a child forked after CUDA is
// initialized cannot use it, so the CPU cases' --isolate does not apply.
// Each engine run gets a fresh engine, warmed up on a short run of the same
// case first, so that making threads, streams and events is not timed; the
// hand-written side makes its streams and events before its clock starts.

#include "tools/bench/engine/gpu_cases.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/engine.h"
#include "engine/error.h"
#include "tools/bench/common/cuda_device.h"
#include "tools/bench/common/spin_kernel.h"
#include "tools/bench/engine/gpu_hand_peers.h"

namespace ember::bench {
namespace {

using Clock = std::chrono::steady_clock;
using engine::FnProperty;

constexpr char kHand[] = "hand-written";
constexpr char kHandThreads[] = "hand, 2 threads";
constexpr char kIdeal[] = "ideal";
constexpr char kTargetEngine[] = "ThreadedEnginePerDeviceAsync";

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// ---------------------------------------------------------------------------
// The engine side. Each op launches one kernel on its stream, as docs/engine.md
// says a GPU op does: on_start() first, on_complete() right after the launch.

void PushKernel(engine::Engine& engine, int* counter, int spin_us, engine::VarList reads,
                engine::VarList writes, FnProperty prop) {
  engine.PushAsync(
      [counter, spin_us](engine::RunContext ctx, const engine::OnStart& on_start,
                         const engine::OnComplete& on_complete) {
        on_start();
        LaunchSpinIncrement(static_cast<cudaStream_t>(ctx.stream), counter, spin_us);
        on_complete();
      },
      reads, writes, {.ctx = engine::Context::GPU(0), .prop = prop, .name = "bench-kernel"});
}

double EngineChain(engine::Engine& engine, FnProperty second, int ops, int spin_us, int* counter) {
  const engine::VarHandle var = engine.NewVariable();
  const auto start = Clock::now();
  for (int i = 0; i < ops; ++i) {
    PushKernel(engine, counter, spin_us, {}, {var}, i % 2 == 0 ? FnProperty::kNormal : second);
  }
  engine.WaitForAll();
  const double seconds = SecondsSince(start);
  engine.DeleteVariable(var);
  engine.WaitForAll();
  return seconds;
}

// counters: 0 for X (two kernels a round), 1..fan_out for the branches.
double EngineFanOut(engine::Engine& engine, int rounds, int fan_out, int spin_us,
                    const Counters& counters) {
  const engine::VarHandle x = engine.NewVariable();
  std::vector<engine::VarHandle> branches(fan_out);
  for (engine::VarHandle& var : branches) var = engine.NewVariable();
  const auto start = Clock::now();
  for (int r = 0; r < rounds; ++r) {
    PushKernel(engine, counters.at(0), spin_us, {}, {x}, FnProperty::kNormal);
    for (int k = 0; k < fan_out; ++k) {
      PushKernel(engine, counters.at(1 + k), spin_us, {x}, {branches[k]}, FnProperty::kNormal);
    }
    PushKernel(engine, counters.at(0), spin_us, branches, {x}, FnProperty::kNormal);
  }
  engine.WaitForAll();
  const double seconds = SecondsSince(start);
  engine.DeleteVariable(x);
  for (engine::VarHandle var : branches) engine.DeleteVariable(var);
  engine.WaitForAll();
  return seconds;
}

double EngineIndependent(engine::Engine& engine, int ops, int spin_us, const Counters& counters) {
  std::vector<engine::VarHandle> vars(ops);
  for (engine::VarHandle& var : vars) var = engine.NewVariable();
  const auto start = Clock::now();
  for (int i = 0; i < ops; ++i) {
    PushKernel(engine, counters.at(i), spin_us, {}, {vars[i]}, FnProperty::kNormal);
  }
  engine.WaitForAll();
  const double seconds = SecondsSince(start);
  for (engine::VarHandle var : vars) engine.DeleteVariable(var);
  engine.WaitForAll();
  return seconds;
}

// ---------------------------------------------------------------------------
// Runs and figures.

// The plain twin of an Async engine ("...Async" less the suffix), or "".
std::string PlainTwin(const std::string& name) {
  constexpr std::string_view kSuffix = "Async";
  if (!std::string_view(name).ends_with(kSuffix)) return "";
  return name.substr(0, name.size() - kSuffix.size());
}

class GpuBench {
 public:
  explicit GpuBench(const GpuBenchOptions& options)
      : options_(options), counters_(std::max({options.independent_ops, options.fan_out + 1, 1})) {}

  void RunChain(int spin_us, int run);
  void RunSameStreamChain(int run);
  void RunFanOut(int run);
  void RunIndependent(int spin_us, int run);
  [[nodiscard]] bool counts_ok() const { return counts_ok_; }
  // The table rows of every case, with the ratios and targets.
  void AddRows(Table* table);
  [[nodiscard]] Results& results() { return results_; }

 private:
  // `profile`: the profile's file name (without directory), if profiling.
  std::unique_ptr<engine::Engine> MakeEngine(const std::string& name, int gpu_workers,
                                             const std::string& profile) const;
  void Record(const std::string& key, const std::string& column, int run, double value,
              const char* unit);
  void Verify(const std::string& who, const std::vector<int>& expected);
  void AddRow(Table* table, const std::string& key, const char* unit, std::string label);
  void AddChainRows(Table* table, int spin_us);
  void AddSpreadNote(Table* table, const std::string& key, const std::string& what);
  void AddSameStreamChainRows(Table* table);
  void AddFanOutRows(Table* table);
  void AddIndependentRows(Table* table, int spin_us);

  const GpuBenchOptions& options_;
  Counters counters_;
  Results results_;
  bool counts_ok_ = true;
};

std::unique_ptr<engine::Engine> GpuBench::MakeEngine(const std::string& name, int gpu_workers,
                                                     const std::string& profile) const {
  // The environment's knobs (EMBER_GPU_WORKER_SPIN_US, ...) apply.
  engine::EngineOptions engine_options =
      engine::ParseEngineType(name, engine::EngineOptions::FromEnv());
  engine_options.gpu_workers = gpu_workers;
  engine_options.pool_workers = gpu_workers;  // ThreadedEngine: as many streams
  if (options_.event_pool_size > 0) engine_options.gpu_event_pool_size = options_.event_pool_size;
  if (!options_.profile_dir.empty()) {
    engine_options.profile_path = absl::StrCat(options_.profile_dir, "/", profile, ".json");
  }
  return engine::CreateEngine(engine_options);
}

void GpuBench::Record(const std::string& key, const std::string& column, int run, double value,
                      const char* unit) {
  results_.Add(key, column, value);
  absl::FPrintF(stderr, "[ember-bench-engine] run %d %-29s %-28s %.6g %s\n", run + 1, column, key,
                value, unit);
}

void GpuBench::Verify(const std::string& who, const std::vector<int>& expected) {
  counts_ok_ = counters_.Match(who, expected) && counts_ok_;
}

std::string ChainKey(int spin_us) { return absl::StrCat("gpu_chain_", spin_us, "us"); }

void GpuBench::RunChain(int spin_us, int run) {
  const std::string key = ChainKey(spin_us);
  const int ops = options_.chain_ops;
  for (const std::string& name : options_.engines) {
    auto engine =
        MakeEngine(name, options_.gpu_workers, absl::StrCat(key, "-", name, "-", run + 1));
    EngineChain(*engine, options_.chain_prop, std::min(ops, 1000), spin_us, counters_.at(0));
    counters_.Zero();
    const double seconds = EngineChain(*engine, options_.chain_prop, ops, spin_us, counters_.at(0));
    Verify(absl::StrCat(name, " ", key), {ops});
    Record(key, name, run, 1e6 * seconds / ops, "us/hop");
  }
  counters_.Zero();
  const double seconds = HandChain(ops, spin_us, /*streams=*/2, counters_.at(0));
  Verify(absl::StrCat(kHand, " ", key), {ops});
  Record(key, kHand, run, 1e6 * seconds / ops, "us/hop");
  counters_.Zero();
  const double threaded = HandChainTwoThreads(ops, spin_us, counters_.at(0));
  Verify(absl::StrCat(kHandThreads, " ", key), {ops});
  Record(key, kHandThreads, run, 1e6 * threaded / ops, "us/hop");
}

// The chain of 0 us kernels on one GPU worker: every op is the continuation
// of the one before on the same thread and stream, so this is the engine's
// cost per GPU op without a hand-off between workers or an event wait.
void GpuBench::RunSameStreamChain(int run) {
  const std::string key = "gpu_chain_same_stream";
  const int ops = options_.chain_ops;
  for (const std::string& name : options_.engines) {
    auto engine = MakeEngine(name, /*gpu_workers=*/1, absl::StrCat(key, "-", name, "-", run + 1));
    EngineChain(*engine, FnProperty::kNormal, std::min(ops, 1000), 0, counters_.at(0));
    counters_.Zero();
    const double seconds = EngineChain(*engine, FnProperty::kNormal, ops, 0, counters_.at(0));
    Verify(absl::StrCat(name, " ", key), {ops});
    Record(key, name, run, 1e6 * seconds / ops, "us/op");
  }
  counters_.Zero();
  const double seconds = HandChain(ops, 0, /*streams=*/1, counters_.at(0));
  Verify(absl::StrCat(kHand, " ", key), {ops});
  Record(key, kHand, run, 1e6 * seconds / ops, "us/op");
}

void GpuBench::RunFanOut(int run) {
  const std::string key = "gpu_fanout";
  const int rounds = options_.dag_rounds;
  if (rounds == 0) return;
  const int k = options_.fan_out;
  const int us = options_.dag_kernel_us;
  std::vector<int> expected(k + 1, rounds);
  expected[0] = 2 * rounds;
  for (const std::string& name : options_.engines) {
    auto engine = MakeEngine(name, std::max(options_.gpu_workers, k),
                             absl::StrCat(key, "-", name, "-", run + 1));
    EngineFanOut(*engine, std::min(rounds, 50), k, us, counters_);
    counters_.Zero();
    const double seconds = EngineFanOut(*engine, rounds, k, us, counters_);
    Verify(absl::StrCat(name, " ", key), expected);
    Record(key, name, run, 1e6 * seconds / rounds, "us/round");
  }
  counters_.Zero();
  const double seconds = HandFanOut(rounds, k, us, counters_);
  Verify(absl::StrCat(kHand, " ", key), expected);
  Record(key, kHand, run, 1e6 * seconds / rounds, "us/round");
  Record(key, kIdeal, run, 3.0 * us, "us/round");  // the critical path
}

std::string IndependentKey(int spin_us) { return absl::StrCat("gpu_independent_", spin_us, "us"); }

void GpuBench::RunIndependent(int spin_us, int run) {
  const std::string key = IndependentKey(spin_us);
  const int ops = options_.independent_ops;
  const std::vector<int> expected(ops, 1);
  for (const std::string& name : options_.engines) {
    auto engine =
        MakeEngine(name, options_.gpu_workers, absl::StrCat(key, "-", name, "-", run + 1));
    // At full size, so that with a --gpu_event_pool_size of at least `ops`
    // the timed run finds every event it needs made already.
    EngineIndependent(*engine, ops, spin_us, counters_);
    counters_.Zero();
    const double seconds = EngineIndependent(*engine, ops, spin_us, counters_);
    Verify(absl::StrCat(name, " ", key), expected);
    Record(key, name, run, ops / seconds, "kernels/s");
  }
  counters_.Zero();
  const double seconds = HandIndependent(ops, spin_us, options_.gpu_workers, counters_);
  Verify(absl::StrCat(kHand, " ", key), expected);
  Record(key, kHand, run, ops / seconds, "kernels/s");
}

// The per-run values behind a row's median: host-bound cases move by tens
// of percent from run to run, and the reader should see how much.
void GpuBench::AddSpreadNote(Table* table, const std::string& key, const std::string& what) {
  for (const std::string& column : table->columns) {
    const std::vector<double>& values = results_.Samples(key, column);
    if (values.empty()) continue;
    std::vector<std::string> runs;
    for (double value : values) runs.push_back(absl::StrFormat("%.2f", value));
    table->notes.push_back(
        absl::StrCat(what, ", ", column, ", per run: ", absl::StrJoin(runs, " ")));
  }
}

void GpuBench::AddRow(Table* table, const std::string& key, const char* unit, std::string label) {
  table->AddRow(results_, key, unit, std::move(label));
}

// Per hop, engine / hand-written per hop, and plain / Async: how much faster
// each Async engine is than its plain twin.
void GpuBench::AddChainRows(Table* table, int spin_us) {
  const std::string key = ChainKey(spin_us);
  for (const std::string& name : options_.engines) {
    results_.AddRatios(key + "_vs_hand", name, key, name, key, kHand);
    if (const std::string plain = PlainTwin(name); !plain.empty()) {
      results_.AddRatios(key + "_plain_vs_async", name, key, plain, key, name);
    }
  }
  AddRow(table, key, "us/hop", absl::StrCat("chain, ", spin_us, " us kernels: per hop"));
  AddRow(table, key + "_vs_hand", "x", "  engine / hand-written");
  AddRow(table, key + "_plain_vs_async", "x", "  plain / Async (Async speedup)");
  if (spin_us == 0) {
    table->targets.push_back(
        {"chain, 0 us kernels: Async / hand-written", key + "_vs_hand", 1.25, false});
    AddSpreadNote(table, key + "_vs_hand", "chain, 0 us kernels, engine / hand-written");
  }
  if (spin_us == 10) {
    table->targets.push_back(
        {"chain, 10 us kernels: plain / Async", key + "_plain_vs_async", 1.8, true});
  }
}

void GpuBench::AddSameStreamChainRows(Table* table) {
  const std::string key = "gpu_chain_same_stream";
  for (const std::string& name : options_.engines) {
    results_.AddRatios(key + "_vs_hand", name, key, name, key, kHand);
  }
  AddRow(table, key, "us/op", "chain, 0 us kernels, one stream: per op");
  AddRow(table, key + "_vs_hand", "x", "  engine / hand-written");
}

void GpuBench::AddFanOutRows(Table* table) {
  const std::string key = "gpu_fanout";
  const double kernels = options_.fan_out + 2;  // a round's kernels
  for (const std::string& column : table->columns) {
    for (double micros : std::vector<double>(results_.Samples(key, column))) {
      results_.Add(key + "_rate", column, kernels * 1e6 / micros);
    }
  }
  for (const std::string& column : table->columns) {
    results_.AddRatios(key + "_vs_ideal", column, key, column, key, kIdeal);
    results_.AddRatios(key + "_vs_hand", column, key, column, key, kHand);
    if (const std::string plain = PlainTwin(column); !plain.empty()) {
      results_.AddRatios(key + "_plain_vs_async", column, key, plain, key, column);
    }
  }
  results_.Erase(key + "_vs_ideal", kIdeal);
  results_.Erase(key + "_vs_hand", kHand);
  results_.Erase(key + "_vs_hand", kIdeal);
  AddRow(table, key, "us/round",
         absl::StrFormat("fan-out/in K=%d, %d us: per round", options_.fan_out,
                         options_.dag_kernel_us));
  AddRow(table, key + "_rate", "kernels/s", "  throughput");
  AddRow(table, key + "_vs_ideal", "x", "  / ideal (3 kernels a round)");
  AddRow(table, key + "_vs_hand", "x", "  engine / hand-written");
  AddRow(table, key + "_plain_vs_async", "x", "  plain / Async (Async speedup)");
}

// Throughput ratios: engine / hand-written above 1 means the engine is faster.
void GpuBench::AddIndependentRows(Table* table, int spin_us) {
  const std::string key = IndependentKey(spin_us);
  for (const std::string& name : options_.engines) {
    results_.AddRatios(key + "_vs_hand", name, key, name, key, kHand);
  }
  AddRow(table, key, "kernels/s", absl::StrCat("independent, ", spin_us, " us kernels"));
  AddRow(table, key + "_vs_hand", "x", "  engine / hand-written");
}

void GpuBench::AddRows(Table* table) {
  for (int us : options_.chain_us) AddChainRows(table, us);
  AddSameStreamChainRows(table);
  AddFanOutRows(table);
  for (int us : options_.independent_us) AddIndependentRows(table, us);
}

std::vector<std::string> OptionNotes(const GpuBenchOptions& o) {
  return {
      absl::StrFormat("chain: %d ops alternating kNormal and k%s on gpu(0); hand-written: 2 "
                      "streams, cudaStreamWaitEvent on every hop, from one thread (and from two "
                      "taking turns); one stream: 1 GPU worker",
                      o.chain_ops, engine::ToString(o.chain_prop)),
      absl::StrFormat("fan-out/in: %d rounds of 1 + %d + 1 kernels, engines with %d normal GPU "
                      "workers; hand-written: %d streams",
                      o.dag_rounds, o.fan_out, std::max(o.gpu_workers, o.fan_out), o.fan_out + 1),
      absl::StrFormat("independent: %d ops, a var each; engines with %d normal GPU workers; "
                      "hand-written: the kernels back to back on %d streams",
                      o.independent_ops, o.gpu_workers, o.gpu_workers),
      absl::StrFormat("median of %d runs, engines and hand-written round-robin in one process; "
                      "GPU event pool: %s",
                      o.repeat,
                      o.event_pool_size > 0 ? absl::StrCat(o.event_pool_size, " events")
                                            : std::string("engine default")),
  };
}

}  // namespace

GpuCasesResult RunGpuCases(const GpuBenchOptions& options) {
  GpuCasesResult result;
  Table& table = result.table;
  table.title = "Engine (GPU)";
  table.target_column = kTargetEngine;
  std::string why;
  const std::optional<std::string> device = DescribeDevice0(&why);
  if (!device) {
    table.notes.push_back(absl::StrCat("GPU cases skipped: ", why));
    absl::FPrintF(stderr, "[ember-bench-engine] %s\n", table.notes.back());
    return result;
  }
  absl::FPrintF(stderr, "[ember-bench-engine] GPU cases on %s\n", *device);
  table.columns = options.engines;
  table.columns.push_back(kHand);
  table.columns.push_back(kHandThreads);
  table.columns.push_back(kIdeal);
  GpuBench bench(options);
  HandChain(100, 0, 2, Counters(1).at(0));  // loads the kernel's module untimed
  for (int run = 0; run < options.repeat; ++run) {
    for (int us : options.chain_us) bench.RunChain(us, run);
    if (!options.chain_us.empty()) bench.RunSameStreamChain(run);
    bench.RunFanOut(run);
    for (int us : options.independent_us) bench.RunIndependent(us, run);
  }
  bench.AddRows(&table);
  table.notes.push_back(absl::StrCat("device: ", *device));
  for (std::string& note : OptionNotes(options)) table.notes.push_back(std::move(note));
  result.counts_ok = bench.counts_ok();
  result.results = std::move(bench.results());
  if (!result.counts_ok) table.notes.push_back("ERROR: a run's counters did not match its kernels");
  return result;
}

}  // namespace ember::bench
