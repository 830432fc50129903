// ember-bench-ops: Ember's table-batched embedding bags (TBE) at DLRM-like
// shapes, forward and backward fused with SGD and row-wise Adagrad, in ms
// and GB/s; beside the GPU's random-row gather bandwidth, measured in the
// same run on the same rows, and PyTorch's nn.EmbeddingBag and torch.optim
// on the same shapes and indices (tools/bench/tbe_torch_peer.py). The cases
// are in ops_cases.h; a table per shape and the targets print like
// ember-bench-storage's (bench_report.h), and --json=PATH writes them with
// every run's figures.
//
// Exit status: 0 when the cases ran (whatever the targets say), 1 when an
// Ember case failed or its forward disagreed with the host's sums, 2 for an
// error (a failed CUDA call names it), 77 when nothing could be measured: no
// CUDA device, or a build without CUDA. A missing python, torch or peer
// script only leaves the PyTorch column empty.

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "engine/engine.h"
#include "engine/error.h"
#include "tools/bench/bench_report.h"
#include "tools/bench/ops_cases.h"

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
ABSL_FLAG(std::string, torch_peer, "",
          "the PyTorch peer script (default: tools/bench/tbe_torch_peer.py of the source tree)");
ABSL_FLAG(std::string, tmp_dir, "", "where the peer's batch files go (default $TMPDIR or /tmp)");
ABSL_FLAG(double, max_weight_gib, 40, "refuse shapes whose weights (T*rows*D*4) exceed this");
ABSL_FLAG(std::string, json, "", "also write the tables, the targets and every run here");

namespace ember::bench {
namespace {

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
// JSON, by hand; every string here is plain ASCII (errors are quoted as they
// come, JsonString escapes quotes and backslashes).

std::string Num(double value) {
  return std::isfinite(value) ? absl::StrFormat("%.10g", value) : "null";
}

std::string Str(const std::string& text) {
  std::string clean;
  for (char c : text) clean.push_back(c == '\n' || c == '\t' ? ' ' : c);
  return JsonString(clean);
}

std::string JsonTimings(const std::map<std::string, Timing>& timings) {
  std::vector<std::string> items;
  for (const auto& [name, t] : timings) {
    std::vector<std::string> runs;
    for (double run : t.runs) runs.push_back(Num(run));
    items.push_back(absl::StrFormat("%s: {\"ms\": %s, \"iters\": %d, \"runs\": [%s]}", Str(name),
                                    Num(t.ms), t.iters, absl::StrJoin(runs, ", ")));
  }
  return absl::StrCat("{", absl::StrJoin(items, ", "), "}");
}

std::string JsonShape(const ShapeResult& r) {
  std::vector<std::string> errors;
  for (const auto& [key, why] : r.errors) errors.push_back(absl::StrCat(Str(key), ": ", Str(why)));
  return absl::StrFormat(
      "    {\"tables\": %d, \"pooling\": %d, \"batch\": %d, \"lookups\": %d, "
      "\"distinct_rows\": %d, \"gather_unroll\": %d, \"skipped\": %s,\n"
      "     \"bytes\": {\"gather\": %s, \"forward\": %s, \"sgd\": %s, \"adagrad\": %s}, "
      "\"forward_checked\": %s,\n     \"ember\": %s,\n     \"torch\": %s,\n     \"errors\": {%s}}",
      r.shape.tables, r.shape.pooling, r.shape.batch, r.lookups, r.distinct_rows, r.gather_unroll,
      r.skipped.empty() ? "null" : Str(r.skipped), Num(r.gather_bytes), Num(r.forward_bytes),
      Num(r.sgd_bytes), Num(r.adagrad_bytes), r.forward_checked ? "true" : "false",
      JsonTimings(r.ember), JsonTimings(r.torch), absl::StrJoin(errors, ", "));
}

std::string JsonTable(const ExtraTable& table) {
  std::vector<std::string> rows;
  for (const ExtraTable::Row& row : table.rows) {
    std::vector<std::string> values;
    for (const auto& [column, value] : row.values) {
      values.push_back(absl::StrCat(Str(column), ": ", Num(value)));
    }
    rows.push_back(
        absl::StrFormat("      {\"case\": %s, \"label\": %s, \"unit\": %s, \"values\": {%s}}",
                        Str(row.key), Str(row.label), Str(row.unit), absl::StrJoin(values, ", ")));
  }
  std::vector<std::string> targets;
  for (const ExtraTable::Target& target : table.targets) {
    std::optional<double> measured;
    std::string unit;
    for (const ExtraTable::Row& row : table.rows) {
      if (row.key != target.key) continue;
      unit = row.unit;
      if (auto it = row.values.find(table.target_engine); it != row.values.end()) {
        measured = it->second;
      }
    }
    const bool pass =
        measured && (target.at_least ? *measured >= target.goal : *measured <= target.goal);
    targets.push_back(absl::StrFormat(
        "      {\"name\": %s, \"column\": %s, \"case\": %s, \"unit\": %s, \"goal\": %s, "
        "\"at_least\": %s, \"measured\": %s, \"pass\": %s}",
        Str(target.name), Str(table.target_engine), Str(target.key), Str(unit), Num(target.goal),
        target.at_least ? "true" : "false", measured ? Num(*measured) : "null",
        pass ? "true" : "false"));
  }
  std::vector<std::string> notes;
  for (const std::string& note : table.notes) notes.push_back(Str(note));
  std::vector<std::string> columns;
  for (const std::string& column : table.columns) columns.push_back(Str(column));
  return absl::StrFormat(
      "    {\"title\": %s, \"columns\": [%s], \"notes\": [%s],\n     \"rows\": [\n%s\n     ],\n"
      "     \"targets\": [%s%s%s]}",
      Str(table.title), absl::StrJoin(columns, ", "), absl::StrJoin(notes, ", "),
      absl::StrJoin(rows, ",\n"), targets.empty() ? "" : "\n", absl::StrJoin(targets, ",\n"),
      targets.empty() ? "" : "\n     ");
}

void WriteJson(const std::string& path, const OpsBenchOptions& o, const OpsCasesResult& result) {
  std::vector<std::string> shapes;
  for (const OpsShape& s : o.shapes) {
    shapes.push_back(absl::StrFormat("\"%dx%dx%d\"", s.tables, s.pooling, s.batch));
  }
  const std::string options = absl::StrFormat(
      "{\"shapes\": [%s], \"rows\": %d, \"dim\": %d, \"zipf\": %s, \"index64\": %s, "
      "\"seed\": %d, \"engine\": %s, \"time_ms\": %s, \"warmup\": %d, \"min_iters\": %d, "
      "\"max_iters\": %d, \"repeat\": %d, \"deterministic\": %s, \"validate\": %s, "
      "\"python\": %s}",
      absl::StrJoin(shapes, ", "), o.rows, o.dim, Num(o.zipf), o.index64 ? "true" : "false", o.seed,
      Str(o.engine), Num(o.time_ms), o.warmup, o.min_iters, o.max_iters, o.repeat,
      o.deterministic ? "true" : "false", o.validate ? "true" : "false", Str(o.python));
  std::vector<std::string> shape_results;
  for (const ShapeResult& r : result.shapes) shape_results.push_back(JsonShape(r));
  std::vector<std::string> tables;
  for (const ExtraTable& table : result.tables) tables.push_back(JsonTable(table));
  const std::string json = absl::StrFormat(
      "{\n  \"benchmark\": \"ember-bench-ops\",\n  \"options\": %s,\n  \"hardware_threads\": %d,\n"
      "  \"device\": %s,\n  \"skipped\": %s,\n  \"torch\": %s,\n  \"ember_failed\": %s,\n"
      "  \"shapes\": [\n%s\n  ],\n  \"tables\": [\n%s\n  ]\n}\n",
      options, std::thread::hardware_concurrency(),
      result.device.empty() ? "null" : Str(result.device),
      result.skipped.empty() ? "null" : Str(result.skipped),
      result.torch_info.empty() ? "null" : Str(result.torch_info),
      result.ember_failed ? "true" : "false", absl::StrJoin(shape_results, ",\n"),
      absl::StrJoin(tables, ",\n"));
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr || std::fputs(json.c_str(), file) < 0 || std::fclose(file) != 0) {
    throw Error(absl::StrCat("[ember-bench-ops] cannot write --json=", path));
  }
}

int Main(const OpsBenchOptions& options, const std::string& json_path) {
  const OpsCasesResult result = RunOpsCases(options);
  if (!result.skipped.empty()) {
    absl::PrintF("ember-bench-ops: nothing measured: %s\n", result.skipped);
    if (!json_path.empty()) WriteJson(json_path, options, result);
    return kSkipped;
  }
  ReportSpec spec;  // no rows of its own: the report prints the TBE tables alone
  spec.tables = result.tables;
  Report(spec, Results(), /*json_path=*/"");
  if (!json_path.empty()) WriteJson(json_path, options, result);
  if (result.ember_failed) {
    absl::PrintF("\nember-bench-ops: an Ember case failed or computed wrong sums (see above)\n");
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
    return ember::bench::Main(ember::bench::OptionsFromFlags(), absl::GetFlag(FLAGS_json));
  } catch (const std::exception& e) {
    absl::FPrintF(stderr, "ember-bench-ops: %s\n", e.what());
    return 2;
  }
}
