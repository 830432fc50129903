// ember-bench-train: Ember's DLRM training step (the runtime of tools/train/)
// in its all-in-GPU configuration, under each schedule, beside the same model
// in PyTorch (dlrm_torch_peer.py, run as a child process where python3 and
// torch are), on the same batches and the same GPU.
//
//   ember-bench-train --tables=26 --rows=100000 --dim=64 --batch=8192 --steps=200
//
// All in GPU: the cache holds 1.25 x the tables' rows, and the run cycles
// over --batches batches, so after the warm-up (at least one cycle) every
// row a step reads is in a slot on the GPU (the summary shows the last
// prefetch's hit rate), as PyTorch's tables are in GPU memory. The batches
// are made once (the synthetic source), so neither side waits for data.
//
// Exit status: 0 ran (the peer may have been unavailable: the table says
// why); 77 no GPU (nothing to compare on); 2 bad input; 1 a failed run.

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/flags/usage.h>
#include <fmt/format.h>

#include "engine/base/device.h"
#include "engine/engine.h"
#include "engine/error.h"
#include "tools/train/bench/model_flags.h"
#include "tools/train/bench/replay_source.h"
#include "tools/train/data/synthetic_source.h"
#include "tools/train/json.h"
#include "tools/train/report.h"
#include "tools/train/runs.h"
#include "tools/train/tool_checks.h"

ABSL_FLAG(int64_t, tables, 26, "embedding tables");
ABSL_FLAG(int64_t, rows, 100000, "rows per table");
ABSL_FLAG(int64_t, dim, 64, "embedding dimension");
ABSL_FLAG(int64_t, dense, 13, "dense features");
ABSL_FLAG(std::string, bottom_mlp, "512,256", "hidden widths of the bottom MLP");
ABSL_FLAG(std::string, top_mlp, "1024,512,256", "hidden widths of the top MLP");
ABSL_FLAG(int64_t, batch, 8192, "examples per batch");
ABSL_FLAG(double, pooling, 2.0, "mean indices per bag");
ABSL_FLAG(std::string, optimizer, "adagrad", "sgd, adagrad or adam");
ABSL_FLAG(double, lr, 0.05, "learning rate");
ABSL_FLAG(bool, tf32, false,
          "let the MLPs' matmuls use TF32 tensor cores on a GPU (faster; not bit-comparable "
          "with the CPU)");
ABSL_FLAG(int64_t, batches, 8, "distinct batches, cycled");
ABSL_FLAG(int64_t, warmup, 20, "steps before the timed ones (at least --batches)");
ABSL_FLAG(int64_t, steps, 200, "timed steps");
ABSL_FLAG(std::string, schedules, "baseline,prefetch,fused,semisync", "Ember's schedules to run");
ABSL_FLAG(std::string, python, "python3", "the peer's interpreter (empty: no peer)");
ABSL_FLAG(std::string, json, "", "write the results as JSON here");
ABSL_FLAG(bool, cpu, false, "run both sides on the CPU: a smoke test of the bench, not a measure");

namespace {

namespace fs = std::filesystem;
using namespace ember::train;  // NOLINT: a bench over the runtime

template <typename T>
void WriteRaw(const std::string& path, const std::vector<T>& values) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(values.data()),
            static_cast<std::streamsize>(values.size() * sizeof(T)));
  if (!out) throw ember::Error(fmt::format("[ember-bench-train] cannot write '{}'", path));
}

struct PeerResult {
  std::string status;          // the peer's info line, or why it did not run
  std::optional<Json> dlrm;    // the fastest of its variants ("variant" names it)
  std::vector<Json> variants;  // each variant's figures, or why it did not run
};

// A peer's row of the table: its figures under the columns Ember's rows
// use (no hit rate), without the line's end.
std::string PeerRow(const std::string& name, const Json& figures) {
  return fmt::format("{:<22} {:>10.3f} {:>10.3f} {:>12.0f} {:>11} {:>10.4g}", name,
                     figures["p50_ms"].number(), figures["p90_ms"].number(),
                     figures["examples_per_second"].number(), "-", figures["final_loss"].number());
}

// A line of the table for one of the peer's variants (dlrm_torch_peer.py):
// its figures, or why it did not run, and the optimizers it used.
std::string PeerVariantLine(const Json& v, const Json& fastest) {
  const std::string name = "  " + v["variant"].string();
  std::string what =
      fmt::format("table {}, MLPs {}", v["table_optimizer"].string(), v["mlp_optimizer"].string());
  if (!v["note"].string().empty()) what += " (" + v["note"].string() + ")";
  if (!v["error"].is_null()) return fmt::format("{:<22} {}: {}\n", name, what, v["error"].string());
  if (v["variant"].string() == fastest["variant"].string()) what += " <- fastest";
  return PeerRow(name, v) + "  " + what + "\n";
}

// What sets the peer's pace: its step's GPU work alone, when steps can be
// queued ahead of the GPU, or else the host too (a step that waits for the
// GPU inside runs at the host's speed as well, which varies from machine to
// machine).
std::string PeerPace(const Json& d) {
  if (d["host_p50_ms"].is_null()) return "";
  const double host = d["host_p50_ms"].number();
  if (d["gpu_only_p50_ms"].is_null()) {
    return fmt::format(
        "pytorch pace: its loop takes {:.3f} ms a step (P50) and waits for the GPU inside the "
        "step, so a step is its GPU work plus the host's\n",
        host);
  }
  return fmt::format(
      "pytorch pace: its loop queues a step in {:.3f} ms (P50); its GPU work alone "
      "takes {:.3f} ms a step\n",
      host, d["gpu_only_p50_ms"].number());
}

// Runs the PyTorch peer on `spec_path` and reads its JSON lines.
PeerResult RunPeer(const std::string& python, const std::string& spec_path, bool cpu) {
  PeerResult r;
  if (python.empty()) {
    r.status = "off (--python is empty)";
    return r;
  }
  const std::string command = fmt::format("'{}' '{}' --spec '{}' --device {}", python,
                                          EMBER_DLRM_TORCH_PEER, spec_path, cpu ? "cpu" : "cuda");
  std::FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    r.status = "could not start " + python;
    return r;
  }
  char line[8192];
  while (std::fgets(line, sizeof(line), pipe) != nullptr) {
    Json j;
    try {
      j = Json::Parse(line);
    } catch (const std::exception&) {
      continue;  // not one of its lines
    }
    if (!j["info"].string().empty()) r.status = j["info"].string();
    // An error of its own (no torch, no GPU, a bad spec); a case's is the table's.
    if (j["case"].is_null() && !j["error"].string().empty()) {
      r.status = "unavailable: " + j["error"].string();
    }
    if (j["case"].string() == "dlrm") r.dlrm = j;
    if (j["case"].string() == "dlrm_variant") r.variants.push_back(j);
  }
  const int status = ::pclose(pipe);
  if (r.status.empty()) r.status = fmt::format("exited with status {} and no output", status);
  return r;
}

int Run() {
  ember::tools::CheckEnvironment();
  ember::tools::CheckWritableFile("--json", absl::GetFlag(FLAGS_json));
  const bool cpu = absl::GetFlag(FLAGS_cpu);
  if (!cpu && ember::GpuCount() == 0) {
    std::printf("ember-bench-train: no GPU; it compares GPU runs (skipped)\n");
    return 77;
  }
  const ModelConfig m = ModelFromFlags();
  const int64_t batch = absl::GetFlag(FLAGS_batch);
  const int64_t num_batches = absl::GetFlag(FLAGS_batches);
  const int64_t warmup = absl::GetFlag(FLAGS_warmup);
  const int64_t steps = absl::GetFlag(FLAGS_steps);
  if (batch < 1 || num_batches < 1 || steps < 1 || warmup < num_batches) {
    throw ember::InvalidArgument(
        "--batch, --batches and --steps must be positive and --warmup at least --batches");
  }

  // The batches, made once: kept for the replay and written for the peer.
  SyntheticOptions synthetic;
  synthetic.batch_size = batch;
  synthetic.num_dense = static_cast<int>(m.num_dense);
  synthetic.rows = m.table_rows;
  synthetic.pooling_mean = absl::GetFlag(FLAGS_pooling);
  synthetic.pooling_max = static_cast<int>(std::lround(2 * synthetic.pooling_mean));
  auto stored = std::make_shared<std::vector<ReplaySource::Stored>>();
  const fs::path dir = fs::temp_directory_path() / fmt::format("ember-bench-train-{}", ::getpid());
  fs::create_directories(dir);
  Json spec = Json::MakeObject();
  Json batch_files = Json::MakeArray();
  {
    std::unique_ptr<ember::engine::Engine> engine = ember::engine::CreateEngine({});
    SyntheticSource source(synthetic);
    for (int64_t k = 0; k < num_batches; ++k) {
      std::optional<HostBatch> b = source.Next({engine.get(), ember::storage::MemoryKind::kCpu});
      ReplaySource::Stored s = ReplaySource::Store(*b);
      const std::string stem = (dir / fmt::format("batch{}", k)).string();
      WriteRaw(stem + ".dense", s.dense);
      WriteRaw(stem + ".labels", s.labels);
      WriteRaw(stem + ".indices", s.indices);
      WriteRaw(stem + ".offsets", s.offsets);
      batch_files.Push(Json::MakeObject()
                           .Set("batch_size", s.batch_size)
                           .Set("num_indices", static_cast<int64_t>(s.indices.size()))
                           .Set("dense", stem + ".dense")
                           .Set("labels", stem + ".labels")
                           .Set("indices", stem + ".indices")
                           .Set("offsets", stem + ".offsets"));
      stored->push_back(std::move(s));
    }
  }
  Json rows = Json::MakeArray();
  for (int64_t r : m.table_rows) rows.Push(r);
  Json bottom = Json::MakeArray(), top = Json::MakeArray();
  for (int64_t w : m.bottom_mlp) bottom.Push(w);
  for (int64_t w : m.top_mlp) top.Push(w);
  spec.Set("num_dense", m.num_dense)
      .Set("table_rows", std::move(rows))
      .Set("dim", m.embedding_dim)
      .Set("bottom_mlp", std::move(bottom))
      .Set("top_mlp", std::move(top))
      .Set("pooling", "sum")
      .Set("optimizer", std::string(ToString(m.optimizer.kind)))
      .Set("lr", static_cast<double>(m.optimizer.dense_lr))
      .Set("embedding_lr", static_cast<double>(m.optimizer.embedding_lr))
      .Set("tf32", m.matmul_precision == ember::ops::MatmulPrecision::kTensorFloat32)
      .Set("batch", batch)
      .Set("warmup", warmup)
      .Set("steps", steps)
      .Set("batches", std::move(batch_files));
  const std::string spec_path = (dir / "spec.json").string();
  std::ofstream(spec_path) << spec.Dump(2) << "\n";

  TrainOptions options;
  options.model = m;
  options.placement.ctx = cpu ? ember::engine::Context::CPU() : ember::engine::Context::GPU(0);
  options.placement.cache.load_factor = 1.25;  // every row has room on the GPU
  options.steps = warmup + steps;
  const DataSpec data_spec{static_cast<int>(m.num_dense), m.table_rows};
  DataFactory data;
  data.train = [&] { return std::make_unique<ReplaySource>(data_spec, batch, stored); };

  std::printf(
      "ember-bench-train: %s, batch %lld, %lld distinct batches, %lld warm-up + %lld timed steps\n",
      m.Describe().c_str(), static_cast<long long>(batch), static_cast<long long>(num_batches),
      static_cast<long long>(warmup), static_cast<long long>(steps));
  Json results = Json::MakeArray();
  std::string table = fmt::format("{:<22} {:>10} {:>10} {:>12} {:>11} {:>10}\n", "run", "P50 ms",
                                  "P90 ms", "ex/s", "last hit %", "loss");
  for (int64_t s : {0, 1, 2, 3}) {
    const Schedule schedule = AllSchedules()[static_cast<std::size_t>(s)];
    if (absl::GetFlag(FLAGS_schedules).find(ToString(schedule)) == std::string::npos) continue;
    options.schedule = schedule;
    std::unique_ptr<ember::engine::Engine> engine =
        ember::engine::CreateEngine(ember::engine::EngineOptions::FromEnv());
    Trainer trainer(*engine, options, data.train(), nullptr);
    const TrainResult result = trainer.Run();
    const std::vector<StepRecord> timed(result.records.begin() + warmup, result.records.end());
    const StepSummary summary = Summarize(timed);
    const double hit = trainer.model().tbe().LastStepStats().all.hit_rate();
    table +=
        fmt::format("{:<22} {:>10.3f} {:>10.3f} {:>12.0f} {:>10.1f}% {:>10.4g}\n",
                    fmt::format("ember {}", ToString(schedule)), summary.p50_ms, summary.p90_ms,
                    summary.examples_per_second, 100.0 * hit, summary.final_loss);
    results.Push(Json::MakeObject()
                     .Set("run", fmt::format("ember {}", ToString(schedule)))
                     .Set("engine", std::string(engine->name()))
                     .Set("p50_ms", summary.p50_ms)
                     .Set("p90_ms", summary.p90_ms)
                     .Set("examples_per_second", summary.examples_per_second)
                     .Set("last_hit_rate", hit)
                     .Set("final_loss", static_cast<double>(summary.final_loss)));
  }
  const PeerResult peer = RunPeer(absl::GetFlag(FLAGS_python), spec_path, cpu);
  if (peer.dlrm && !(*peer.dlrm)["p50_ms"].is_null() && (*peer.dlrm)["error"].is_null()) {
    const Json& d = *peer.dlrm;
    table += PeerRow("pytorch", d) + "\n";
    // Each variant the peer timed, under its row (which is the fastest).
    Json variants = Json::MakeArray();
    for (const Json& v : peer.variants) {
      table += PeerVariantLine(v, d);
      variants.Push(v);
    }
    if (!d["variant"].string().empty()) {
      table += fmt::format("pytorch: the fastest of its variants, {} (table {}, MLPs {})\n",
                           d["variant"].string(), d["table_optimizer"].string(),
                           d["mlp_optimizer"].string());
    }
    results.Push(Json::MakeObject()
                     .Set("run", "pytorch")
                     .Set("variant", d["variant"])
                     .Set("p50_ms", d["p50_ms"].number())
                     .Set("p90_ms", d["p90_ms"].number())
                     .Set("examples_per_second", d["examples_per_second"].number())
                     .Set("final_loss", d["final_loss"].number())
                     .Set("host_p50_ms", d["host_p50_ms"])
                     .Set("gpu_only_p50_ms", d["gpu_only_p50_ms"])
                     .Set("variants", std::move(variants)));
    table += PeerPace(d);
    // The ratio the target is about: Ember's examples/s over the peer's.
    const double peer_rate = d["examples_per_second"].number();
    const Json::Array& runs = results.array();
    for (std::size_t i = 0; i + 1 < runs.size(); ++i) {
      table += fmt::format("{} / pytorch: {:.2f}x examples/s\n", runs[i]["run"].string(),
                           runs[i]["examples_per_second"].number() / peer_rate);
    }
  } else if (peer.dlrm) {
    table += fmt::format("pytorch: {}\n", (*peer.dlrm)["error"].string());
    for (const Json& v : peer.variants) table += PeerVariantLine(v, *peer.dlrm);
  }
  std::printf("%s(pytorch: %s)\n", table.c_str(), peer.status.c_str());
  if (const std::string path = absl::GetFlag(FLAGS_json); !path.empty()) {
    std::ofstream(path) << Json::MakeObject()
                               .Set("model", m.Describe())
                               .Set("batch", batch)
                               .Set("peer", peer.status)
                               .Set("runs", std::move(results))
                               .Dump(2)
                        << "\n";
  }
  fs::remove_all(dir);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Times Ember's DLRM training step (all in GPU) under each schedule beside PyTorch's.");
  absl::ParseCommandLine(argc, argv);
  try {
    return Run();
  } catch (const ember::InvalidArgument& e) {
    std::fprintf(stderr, "ember-bench-train: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ember-bench-train: %s\n", e.what());
    return 1;
  }
}
