// ember-bench-ops: Ember's table-batched embedding bags (TBE) at DLRM-like
// shapes, forward and backward fused with SGD and row-wise Adagrad, in ms
// and GB/s; beside the GPU's random-row gather bandwidth, measured in the
// same run on the same rows, and PyTorch's nn.EmbeddingBag and torch.optim
// on the same shapes and indices (tbe_torch_peer.py). The cases are in
// ops_cases.h; a table per shape and the targets print as every bench's do
// (common/table_printer.h), and --json=PATH writes them with every run's
// figures (common/json_writer.h).
//
// Exit status: 0 when the cases ran (whatever the targets say), 1 when an
// Ember case failed or its forward disagreed with the host's sums, 2 for an
// error (a failed CUDA call names it), 77 when nothing could be measured: no
// CUDA device, or a build without CUDA. A missing python, torch or peer
// script only leaves the PyTorch column empty.

#include <cstdint>
#include <cstdio>
#include <exception>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "engine/engine.h"
#include "engine/error.h"
#include "tools/bench/common/json_writer.h"
#include "tools/bench/common/machine_notes.h"
#include "tools/bench/common/table_printer.h"
#include "tools/bench/ops/ops_cases.h"
#include "tools/train/tool_checks.h"

ABSL_FLAG(std::vector<std::string>, shapes,
          std::vector<std::string>({"8x20x16384", "8x20x65536", "8x80x16384", "8x80x65536",
                                    "32x20x16384", "32x20x65536", "32x80x16384", "32x80x65536"}),
          "shapes as TABLESxPOOLINGxBATCH (T tables, L lookups per bag, B bags per table)");
ABSL_FLAG(int64_t, rows, 1'000'000, "rows per table");
ABSL_FLAG(int, dim, 128, "embedding dimension D (a multiple of 4)");
ABSL_FLAG(double, zipf, 1.05, "Zipf exponent of the indices over each table's rows (0: uniform)");
ABSL_FLAG(bool, index64, false, "i64 indices and offsets (default i32: half the index traffic)");
ABSL_FLAG(uint64_t, seed, 1, "seed of the indices and the values");
ABSL_FLAG(std::string, engine, "ThreadedEnginePerDeviceAsync", "the engine, by ENGINE_TYPE name");
ABSL_FLAG(double, time_ms, 100, "about this much work per timed run");
ABSL_FLAG(int, warmup, 2, "untimed iterations per case");
ABSL_FLAG(int, min_iters, 3, "fewest iterations per timed run");
ABSL_FLAG(int, max_iters, 200, "most iterations per timed run");
ABSL_FLAG(int, repeat, 3, "timed runs per case (the median is reported)");
ABSL_FLAG(bool, deterministic, true, "also run the deterministic backward");
ABSL_FLAG(bool, validate, true, "also run the forward with validate=true");
ABSL_FLAG(std::string, python, "python3", "the python of the PyTorch peer (empty: no peer)");
ABSL_FLAG(
    std::string, torch_peer, "",
    "the PyTorch peer script (default: tools/bench/ops/tbe_torch_peer.py of the source tree)");
ABSL_FLAG(std::string, tmp_dir, "", "where the peer's batch files go (default $TMPDIR or /tmp)");
ABSL_FLAG(double, max_weight_gib, 40, "refuse shapes whose weights (T*rows*D*4) exceed this");
ABSL_FLAG(std::string, json, "", "also write the tables, the targets and every run here");

namespace ember::bench {
namespace {

constexpr char kWho[] = "ember-bench-ops";
constexpr int kSkipped = 77;

[[noreturn]] void Bad(const std::string& what) {
  throw InvalidArgument(absl::StrCat("[ember-bench-ops] ", what));
}

OpsShape ParseShape(const std::string& text) {
  const std::vector<std::string> parts = absl::StrSplit(text, 'x');
  OpsShape shape;
  if (parts.size() != 3 || !absl::SimpleAtoi(parts[0], &shape.tables) ||
      !absl::SimpleAtoi(parts[1], &shape.pooling) || !absl::SimpleAtoi(parts[2], &shape.batch) ||
      shape.tables < 1 || shape.pooling < 1 || shape.batch < 1) {
    Bad(absl::StrCat("--shapes: '", text, "' is not TABLESxPOOLINGxBATCH, e.g. 8x20x16384"));
  }
  return shape;
}

OpsBenchOptions OptionsFromFlags() {
  OpsBenchOptions o;
  for (const std::string& text : absl::GetFlag(FLAGS_shapes)) o.shapes.push_back(ParseShape(text));
  if (o.shapes.empty()) Bad("--shapes is empty");
  o.rows = absl::GetFlag(FLAGS_rows);
  o.dim = absl::GetFlag(FLAGS_dim);
  o.zipf = absl::GetFlag(FLAGS_zipf);
  o.index64 = absl::GetFlag(FLAGS_index64);
  o.seed = absl::GetFlag(FLAGS_seed);
  o.engine = absl::GetFlag(FLAGS_engine);
  o.time_ms = absl::GetFlag(FLAGS_time_ms);
  o.warmup = absl::GetFlag(FLAGS_warmup);
  o.min_iters = absl::GetFlag(FLAGS_min_iters);
  o.max_iters = absl::GetFlag(FLAGS_max_iters);
  o.repeat = absl::GetFlag(FLAGS_repeat);
  o.deterministic = absl::GetFlag(FLAGS_deterministic);
  o.validate = absl::GetFlag(FLAGS_validate);
  o.python = absl::GetFlag(FLAGS_python);
  o.torch_peer = absl::GetFlag(FLAGS_torch_peer);
  o.tmp_dir = absl::GetFlag(FLAGS_tmp_dir);
  if (o.rows < 1 || o.rows > std::numeric_limits<int32_t>::max()) Bad("--rows: 1 to 2^31-1");
  if (o.dim < 4 || o.dim % 4 != 0) Bad("--dim: a positive multiple of 4");
  if (!(o.zipf >= 0)) Bad("--zipf: at least 0");
  if (o.warmup < 0 || o.min_iters < 1 || o.max_iters < o.min_iters || o.repeat < 1 ||
      !(o.time_ms > 0)) {
    Bad("--warmup >= 0, 1 <= --min_iters <= --max_iters, --repeat >= 1, --time_ms > 0");
  }
  engine::ParseEngineType(o.engine);  // throws if bad
  const double max_gib = absl::GetFlag(FLAGS_max_weight_gib);
  for (const OpsShape& s : o.shapes) {
    const double gib = double(s.tables) * double(o.rows) * o.dim * 4 / double(1 << 30);
    if (gib > max_gib) {
      Bad(absl::StrFormat("shape %dx%dx%d: weights of %.1f GiB exceed --max_weight_gib=%g",
                          s.tables, s.pooling, s.batch, gib, max_gib));
    }
    if (!o.index64 && double(s.tables) * s.pooling * double(s.batch) >
                          double(std::numeric_limits<int32_t>::max())) {
      Bad(absl::StrFormat("shape %dx%dx%d: more than 2^31-1 lookups need --index64", s.tables,
                          s.pooling, s.batch));
    }
  }
  return o;
}

// ---------------------------------------------------------------------------
// JSON: the tables as every bench writes them, and each shape's figures.

std::string JsonTimings(const std::map<std::string, Timing>& timings) {
  JsonObject object;
  for (const auto& [name, t] : timings) {
    std::vector<std::string> runs;
    for (double run : t.runs) runs.push_back(JsonNumber(run));
    object.Add(name, JsonObject()
                         .Add("ms", JsonNumber(t.ms))
                         .Add("iters", absl::StrCat(t.iters))
                         .Add("runs", JsonArray(runs))
                         .Render());
  }
  return object.Render();
}

std::string JsonShape(const ShapeResult& r) {
  JsonObject errors;
  for (const auto& [key, why] : r.errors) errors.Add(key, JsonString(why));
  return JsonObject()
      .Add("tables", absl::StrCat(r.shape.tables))
      .Add("pooling", absl::StrCat(r.shape.pooling))
      .Add("batch", absl::StrCat(r.shape.batch))
      .Add("lookups", absl::StrCat(r.lookups))
      .Add("distinct_rows", absl::StrCat(r.distinct_rows))
      .Add("gather_unroll", absl::StrCat(r.gather_unroll))
      .Add("skipped", r.skipped.empty() ? "null" : JsonString(r.skipped))
      .Add("bytes", JsonObject()
                        .Add("gather", JsonNumber(r.gather_bytes))
                        .Add("forward", JsonNumber(r.forward_bytes))
                        .Add("sgd", JsonNumber(r.sgd_bytes))
                        .Add("adagrad", JsonNumber(r.adagrad_bytes))
                        .Render())
      .Add("forward_checked", JsonBool(r.forward_checked))
      .Add("ember", JsonTimings(r.ember))
      .Add("torch", JsonTimings(r.torch))
      .Add("errors", errors.Render())
      .Render(6);
}

std::string OptionsJson(const OpsBenchOptions& o) {
  std::vector<std::string> shapes;
  for (const OpsShape& s : o.shapes) {
    shapes.push_back(absl::StrFormat("%dx%dx%d", s.tables, s.pooling, s.batch));
  }
  return JsonObject()
      .Add("shapes", JsonStrings(shapes))
      .Add("rows", absl::StrCat(o.rows))
      .Add("dim", absl::StrCat(o.dim))
      .Add("zipf", JsonNumber(o.zipf))
      .Add("index64", JsonBool(o.index64))
      .Add("seed", absl::StrCat(o.seed))
      .Add("engine", JsonString(o.engine))
      .Add("time_ms", JsonNumber(o.time_ms))
      .Add("warmup", absl::StrCat(o.warmup))
      .Add("min_iters", absl::StrCat(o.min_iters))
      .Add("max_iters", absl::StrCat(o.max_iters))
      .Add("repeat", absl::StrCat(o.repeat))
      .Add("deterministic", JsonBool(o.deterministic))
      .Add("validate", JsonBool(o.validate))
      .Add("python", JsonString(o.python))
      .Render(4);
}

void WriteJson(const std::string& path, const OpsBenchOptions& o, const MachineInfo& machine,
               const OpsCasesResult& result) {
  std::vector<std::string> shapes;
  for (const ShapeResult& r : result.shapes) shapes.push_back(JsonShape(r));
  const std::string json =
      JsonObject()
          .Add("benchmark", JsonString(kWho))
          .Add("options", OptionsJson(o))
          .Add("machine", machine.Json())
          .Add("device", result.device.empty() ? "null" : JsonString(result.device))
          .Add("skipped", result.skipped.empty() ? "null" : JsonString(result.skipped))
          .Add("torch", result.torch_info.empty() ? "null" : JsonString(result.torch_info))
          .Add("ember_failed", JsonBool(result.ember_failed))
          .Add("shapes", JsonArray(shapes, 4))
          .Add("tables", JsonArray(TablesJson(result.tables), 4))
          .Render(2) +
      "\n";
  WriteJsonFile(path, json, kWho);
}

int Main(const OpsBenchOptions& options, const std::string& json_path) {
  const MachineInfo machine = MachineInfo::Read();
  OpsCasesResult result = RunOpsCases(options);
  if (!result.skipped.empty()) {
    absl::PrintF("%s: nothing measured: %s\n", kWho, result.skipped);
    if (!json_path.empty()) WriteJson(json_path, options, machine, result);
    return kSkipped;
  }
  if (!result.tables.empty()) result.tables.back().notes.push_back("host " + machine.Note());
  PrintTables(result.tables);
  if (!json_path.empty()) WriteJson(json_path, options, machine, result);
  if (result.ember_failed) {
    absl::PrintF("\n%s: an Ember case failed or computed wrong sums (see above)\n", kWho);
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace ember::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "TBE (table-batched embedding bags) forward and backward+optimizer at DLRM-like shapes, "
      "beside the GPU's random-row gather bandwidth and PyTorch's nn.EmbeddingBag.\n"
      "Usage: ember-bench-ops [--shapes=TxLxB,...] [--rows=N] [--zipf=A] [--index64] "
      "[--python=python3] [--json=PATH]\n"
      "Exit status: 0 ran, 1 an Ember case failed, 2 error, 77 nothing measured (no CUDA device "
      "or no CUDA build).");
  absl::ParseCommandLine(argc, argv);
  try {
    // Bad input fails here, at once, not after the cases ran (an unwritable
    // --tmp_dir would only leave the PyTorch column empty).
    ember::tools::CheckEnvironment();
    ember::tools::CheckWritableFile("--json", absl::GetFlag(FLAGS_json));
    ember::tools::CheckWritableDir("--tmp_dir", absl::GetFlag(FLAGS_tmp_dir));
    return ember::bench::Main(ember::bench::OptionsFromFlags(), absl::GetFlag(FLAGS_json));
  } catch (const std::exception& e) {
    absl::FPrintF(stderr, "ember-bench-ops: %s\n", e.what());
    return 2;
  }
}
