// ember-bench-cache: the embedding cache (cache/cached_tbe.h) against what
// bounds it, each case beside its reference in one run: prefetch throughput
// beside the host-to-GPU bandwidth, the all-hit prefetch beside the cached
// forward and the cached forward beside ops' TBE forward on GPU weights,
// prefetch temporaries at 1, 4 and 12 passes, hit rates beside an exact
// LRU and Belady's optimum, and tables larger than the GPU. The cases are
// in cache_cases.h; the tables and the targets print as every bench's do
// (common/table_printer.h), and --json=PATH writes them with every run's
// figures (common/json_writer.h).
//
// Without a GPU (or with --device=cpu) the GPU cases say why they did not
// run and the hit-rate case runs on the CPU cache.
//
// Exit status: 0 when the cases ran (whatever the targets say), 1 when a
// check failed (a cached forward that disagrees with ops' forward, cache
// statistics that disagree with the trace, a case that failed), 2 for an
// error, 77 when nothing could be measured.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
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
#include "tools/bench/cache/cache_cases.h"
#include "tools/bench/common/json_writer.h"
#include "tools/bench/common/machine_notes.h"
#include "tools/bench/common/table_printer.h"
#include "tools/train/tool_checks.h"

ABSL_FLAG(std::string, device, "gpu",
          "gpu: every case on GPU 0 (without one, the hit-rate case on the CPU cache); cpu: the "
          "hit-rate case on the CPU cache, nothing else");
ABSL_FLAG(std::vector<std::string>, cases,
          std::vector<std::string>({"prefetch", "all_hit", "passes", "hit_rate", "oversize"}),
          "cases to run: prefetch, all_hit, passes, hit_rate, oversize");
ABSL_FLAG(bool, quick, false,
          "smaller runs (about 30 s on an H100): fewer repeats and steps, smaller hit-rate traces, "
          "a 4 GB 'oversize' table (the path only); flags given explicitly win");
ABSL_FLAG(std::string, engine, "ThreadedEnginePerDeviceAsync", "the engine, by ENGINE_TYPE name");
ABSL_FLAG(uint64_t, seed, 1, "seed of every batch and value");
ABSL_FLAG(int, repeat, 5, "timed runs per figure (the median is reported)");
ABSL_FLAG(int, warmup, 2, "untimed runs or steps first");
ABSL_FLAG(int64_t, h2d_mib, 1024, "bytes of the host-to-GPU references, MiB");
ABSL_FLAG(std::string, prefetch_shape, "8x1x32768", "prefetch case: TABLESxPOOLINGxBATCH");
ABSL_FLAG(int64_t, prefetch_rows, 524'288, "prefetch case: rows per table (uniform lookups)");
ABSL_FLAG(double, prefetch_load_factor, 0.1, "prefetch case: cached rows / rows");
ABSL_FLAG(int, prefetch_batches, 16, "prefetch case: distinct batches, cycled");
ABSL_FLAG(int, prefetch_steps, 16, "prefetch case: steps per timed run");
ABSL_FLAG(std::vector<std::string>, prefetch_homes, std::vector<std::string>({"mapped", "managed"}),
          "prefetch case: homes of the rows (mapped, mapped-copy: its fills by the copy "
          "engines, managed)");
ABSL_FLAG(int64_t, staging_mib, ember::cache::CacheOptions{}.staging_bytes >> 20,
          "CacheOptions::staging_bytes of every cache with a mapped home, MiB (0: none)");
ABSL_FLAG(std::string, shape, "8x20x16384", "all_hit and passes cases: TABLESxPOOLINGxBATCH");
ABSL_FLAG(int64_t, rows, 1'000'000, "all_hit and passes cases: rows per table");
ABSL_FLAG(int, dim, 128, "embedding dimension of every case but hit_rate (a multiple of 4)");
ABSL_FLAG(double, zipf, 1.05, "Zipf exponent of the all_hit, passes and oversize lookups");
ABSL_FLAG(double, all_hit_slack, 2.5, "all_hit case: cache slots per distinct row of the batch");
ABSL_FLAG(int, all_hit_iters, 16, "all_hit case: ops per timed run");
ABSL_FLAG(std::vector<std::string>, passes, std::vector<std::string>({"1", "4", "12"}),
          "passes case: prefetch passes M (must include 1)");
ABSL_FLAG(double, passes_load_factor, 0.2, "passes case: cached rows / rows");
ABSL_FLAG(int, passes_batches, 8, "passes case: distinct batches, cycled");
ABSL_FLAG(int, passes_steps, 8, "passes case: steps per timed run");
ABSL_FLAG(std::vector<std::string>, hit_alphas, std::vector<std::string>({"0.8", "1.0", "1.2"}),
          "hit_rate case: Zipf exponents");
ABSL_FLAG(std::vector<std::string>, hit_table_ratios, std::vector<std::string>({"10", "30", "100"}),
          "hit_rate case: table rows / cache rows");
ABSL_FLAG(int64_t, hit_cache_rows, 32'768, "hit_rate case: cache rows (a multiple of 32)");
ABSL_FLAG(int64_t, hit_batch, 32'768, "hit_rate case: lookups a batch");
ABSL_FLAG(int, hit_batches, 200, "hit_rate case: measured batches");
ABSL_FLAG(int, hit_warmup, 50, "hit_rate case: batches before the measured ones");
ABSL_FLAG(int, hit_dim, 8, "hit_rate case: row dim (the hit rate does not depend on it)");
ABSL_FLAG(double, oversize_gb, 90, "oversize case: table bytes, GB (capped by host memory)");
ABSL_FLAG(double, oversize_reserve_gib, 16, "oversize case: host memory left to the rest, GiB");
ABSL_FLAG(double, oversize_cache_gib, 8, "oversize case: the cache's budget, GiB");
ABSL_FLAG(std::string, oversize_shape, "8x20x16384", "oversize case: TABLESxPOOLINGxBATCH");
ABSL_FLAG(int, oversize_steps, 8, "oversize case: steps per timed run");
ABSL_FLAG(std::string, json, "", "also write the tables, the targets and every run here");

namespace ember::bench {
namespace {

constexpr char kWho[] = "ember-bench-cache";
constexpr int kSkipped = 77;

[[noreturn]] void Bad(const std::string& what) {
  throw InvalidArgument(absl::StrCat("[ember-bench-cache] ", what));
}

// The flag's value; with --quick, `quick` instead when the flag was left at
// its default.
template <typename T>
T Flag(const absl::Flag<T>& flag, T quick) {
  const absl::CommandLineFlag& handle = absl::GetFlagReflectionHandle(flag);
  if (absl::GetFlag(FLAGS_quick) && handle.CurrentValue() == handle.DefaultValue()) return quick;
  return absl::GetFlag(flag);
}

// TABLESxPOOLINGxBATCH into `shape` (its rows, dim and zipf untouched).
void ParseShape(const char* flag, const std::string& text, CacheShape* shape) {
  const std::vector<std::string> parts = absl::StrSplit(text, 'x');
  if (parts.size() != 3 || !absl::SimpleAtoi(parts[0], &shape->tables) ||
      !absl::SimpleAtoi(parts[1], &shape->pooling) || !absl::SimpleAtoi(parts[2], &shape->batch) ||
      shape->tables < 1 || shape->pooling < 1 || shape->batch < 1) {
    Bad(absl::StrCat("--", flag, ": '", text, "' is not TABLESxPOOLINGxBATCH, e.g. 8x20x16384"));
  }
}

template <typename T>
std::vector<T> Numbers(const char* flag, const std::vector<std::string>& texts) {
  std::vector<T> values;
  for (const std::string& text : texts) {
    T value{};
    bool ok = false;
    if constexpr (std::is_floating_point_v<T>) {
      ok = absl::SimpleAtod(text, &value);
    } else {
      ok = absl::SimpleAtoi(text, &value) && value > 0;
    }
    if (!ok) Bad(absl::StrCat("--", flag, ": '", text, "' is not a valid number"));
    values.push_back(value);
  }
  if (values.empty()) Bad(absl::StrCat("--", flag, " is empty"));
  return values;
}

CacheBenchOptions OptionsFromFlags() {
  CacheBenchOptions o;
  const std::string device = absl::GetFlag(FLAGS_device);
  if (device != "gpu" && device != "cpu") Bad("--device: gpu or cpu, not '" + device + "'");
  o.on_gpu = device == "gpu";
  o.prefetch = o.all_hit = o.passes = o.hit_rate = o.oversize = false;
  for (const std::string& name : absl::GetFlag(FLAGS_cases)) {
    bool* on = name == "prefetch"   ? &o.prefetch
               : name == "all_hit"  ? &o.all_hit
               : name == "passes"   ? &o.passes
               : name == "hit_rate" ? &o.hit_rate
               : name == "oversize" ? &o.oversize
                                    : nullptr;
    if (on == nullptr) {
      Bad("unknown case '" + name + "'; valid: prefetch, all_hit, passes, hit_rate, oversize");
    }
    *on = true;
  }
  o.engine = absl::GetFlag(FLAGS_engine);
  engine::ParseEngineType(o.engine);  // throws if bad
  o.seed = absl::GetFlag(FLAGS_seed);
  o.repeat = Flag(FLAGS_repeat, 3);
  o.warmup = absl::GetFlag(FLAGS_warmup);
  o.h2d_bytes = absl::GetFlag(FLAGS_h2d_mib) << 20;
  const int dim = absl::GetFlag(FLAGS_dim);
  const double zipf = absl::GetFlag(FLAGS_zipf);

  ParseShape("prefetch_shape", absl::GetFlag(FLAGS_prefetch_shape), &o.prefetch_shape);
  o.prefetch_shape.rows = absl::GetFlag(FLAGS_prefetch_rows);
  o.prefetch_shape.dim = dim;
  o.prefetch_shape.zipf = 0;
  o.prefetch_load_factor = absl::GetFlag(FLAGS_prefetch_load_factor);
  o.prefetch_batches = absl::GetFlag(FLAGS_prefetch_batches);
  o.prefetch_steps = Flag(FLAGS_prefetch_steps, 8);
  o.prefetch_homes = absl::GetFlag(FLAGS_prefetch_homes);
  o.staging_bytes = absl::GetFlag(FLAGS_staging_mib) << 20;
  if (o.staging_bytes < 0) Bad("--staging_mib must not be negative");
  for (const std::string& home : o.prefetch_homes) {
    if (home != "mapped" && home != "mapped-copy" && home != "managed") {
      Bad("--prefetch_homes: mapped, mapped-copy or managed");
    }
  }

  ParseShape("shape", absl::GetFlag(FLAGS_shape), &o.shape);
  o.shape.rows = absl::GetFlag(FLAGS_rows);
  o.shape.dim = dim;
  o.shape.zipf = zipf;
  o.all_hit_slack = absl::GetFlag(FLAGS_all_hit_slack);
  o.all_hit_iters = Flag(FLAGS_all_hit_iters, 8);
  o.passes_list = Numbers<int>("passes", absl::GetFlag(FLAGS_passes));
  if (std::find(o.passes_list.begin(), o.passes_list.end(), 1) == o.passes_list.end()) {
    Bad("--passes must include 1 (the other times are relative to it)");
  }
  o.passes_load_factor = absl::GetFlag(FLAGS_passes_load_factor);
  o.passes_batches = absl::GetFlag(FLAGS_passes_batches);
  o.passes_steps = Flag(FLAGS_passes_steps, 4);

  o.hit_alphas = Numbers<double>("hit_alphas", absl::GetFlag(FLAGS_hit_alphas));
  o.hit_table_ratios = Numbers<int>("hit_table_ratios", absl::GetFlag(FLAGS_hit_table_ratios));
  o.hit_cache_rows = Flag(FLAGS_hit_cache_rows, int64_t{8192});
  o.hit_batch_indices = Flag(FLAGS_hit_batch, int64_t{8192});
  o.hit_batches = Flag(FLAGS_hit_batches, 60);
  o.hit_warmup = Flag(FLAGS_hit_warmup, 20);
  o.hit_dim = absl::GetFlag(FLAGS_hit_dim);

  o.oversize_gb = Flag(FLAGS_oversize_gb, 4.0);
  o.oversize_reserve_gib = absl::GetFlag(FLAGS_oversize_reserve_gib);
  o.oversize_cache_gib = Flag(FLAGS_oversize_cache_gib, 1.0);
  ParseShape("oversize_shape", absl::GetFlag(FLAGS_oversize_shape), &o.oversize_shape);
  o.oversize_shape.dim = dim;
  o.oversize_shape.zipf = zipf;
  o.oversize_steps = Flag(FLAGS_oversize_steps, 4);

  if (dim < 4 || dim % 4 != 0) Bad("--dim: a positive multiple of 4");
  if (o.hit_dim < 1) Bad("--hit_dim: at least 1");
  if (o.repeat < 1 || o.warmup < 0) Bad("--repeat >= 1, --warmup >= 0");
  if (o.hit_cache_rows < 32 || o.hit_cache_rows % 32 != 0)
    Bad("--hit_cache_rows: a multiple of 32");
  for (int64_t n : {o.prefetch_shape.rows, o.shape.rows, o.hit_cache_rows * 100}) {
    if (n < 1 || n > std::numeric_limits<int32_t>::max()) Bad("rows per table: 1 to 2^31-1");
  }
  for (int n : {o.prefetch_batches, o.prefetch_steps, o.all_hit_iters, o.passes_batches,
                o.passes_steps, o.hit_batches, o.oversize_steps}) {
    if (n < 1) Bad("batches, steps and iterations: at least 1");
  }
  if (o.hit_warmup < 1) Bad("--hit_warmup: at least 1");
  if (o.h2d_bytes < (int64_t{1} << 20)) Bad("--h2d_mib: at least 1");
  return o;
}

std::string ShapeJson(const CacheShape& s) {
  return JsonObject()
      .Add("tables", absl::StrCat(s.tables))
      .Add("rows", absl::StrCat(s.rows))
      .Add("dim", absl::StrCat(s.dim))
      .Add("pooling", absl::StrCat(s.pooling))
      .Add("batch", absl::StrCat(s.batch))
      .Add("zipf", JsonNumber(s.zipf))
      .Render();
}

std::string OptionsJson(const CacheBenchOptions& o) {
  std::vector<std::string> cases;
  for (const auto& [on, name] : {std::pair{o.prefetch, "prefetch"}, std::pair{o.all_hit, "all_hit"},
                                 std::pair{o.passes, "passes"}, std::pair{o.hit_rate, "hit_rate"},
                                 std::pair{o.oversize, "oversize"}}) {
    if (on) cases.push_back(name);
  }
  std::vector<std::string> passes, alphas, ratios;
  for (int m : o.passes_list) passes.push_back(absl::StrCat(m));
  for (double a : o.hit_alphas) alphas.push_back(JsonNumber(a));
  for (int r : o.hit_table_ratios) ratios.push_back(absl::StrCat(r));
  return JsonObject()
      .Add("device", JsonString(o.on_gpu ? "gpu" : "cpu"))
      .Add("cases", JsonStrings(cases))
      .Add("quick", JsonBool(absl::GetFlag(FLAGS_quick)))
      .Add("engine", JsonString(o.engine))
      .Add("seed", absl::StrCat(o.seed))
      .Add("repeat", absl::StrCat(o.repeat))
      .Add("warmup", absl::StrCat(o.warmup))
      .Add("h2d_bytes", absl::StrCat(o.h2d_bytes))
      .Add("prefetch_shape", ShapeJson(o.prefetch_shape))
      .Add("prefetch_load_factor", JsonNumber(o.prefetch_load_factor))
      .Add("prefetch_batches", absl::StrCat(o.prefetch_batches))
      .Add("prefetch_steps", absl::StrCat(o.prefetch_steps))
      .Add("prefetch_homes", JsonStrings(o.prefetch_homes))
      .Add("staging_bytes", absl::StrCat(o.staging_bytes))
      .Add("shape", ShapeJson(o.shape))
      .Add("all_hit_slack", JsonNumber(o.all_hit_slack))
      .Add("all_hit_iters", absl::StrCat(o.all_hit_iters))
      .Add("passes", JsonArray(passes))
      .Add("passes_load_factor", JsonNumber(o.passes_load_factor))
      .Add("passes_batches", absl::StrCat(o.passes_batches))
      .Add("passes_steps", absl::StrCat(o.passes_steps))
      .Add("hit_alphas", JsonArray(alphas))
      .Add("hit_table_ratios", JsonArray(ratios))
      .Add("hit_cache_rows", absl::StrCat(o.hit_cache_rows))
      .Add("hit_batch", absl::StrCat(o.hit_batch_indices))
      .Add("hit_batches", absl::StrCat(o.hit_batches))
      .Add("hit_warmup", absl::StrCat(o.hit_warmup))
      .Add("hit_dim", absl::StrCat(o.hit_dim))
      .Add("oversize_gb", JsonNumber(o.oversize_gb))
      .Add("oversize_reserve_gib", JsonNumber(o.oversize_reserve_gib))
      .Add("oversize_cache_gib", JsonNumber(o.oversize_cache_gib))
      .Add("oversize_shape", ShapeJson(o.oversize_shape))
      .Render(4);
}

void WriteJson(const std::string& path, const CacheBenchOptions& o, const MachineInfo& machine,
               const CacheCasesResult& result) {
  std::vector<Table> tables = result.tables;
  tables.push_back(result.summary);
  const std::string json =
      JsonObject()
          .Add("benchmark", JsonString(kWho))
          .Add("options", OptionsJson(o))
          .Add("machine", machine.Json())
          .Add("device", result.device.empty() ? "null" : JsonString(result.device))
          .Add("failed", JsonBool(result.failed))
          .Add("tables", JsonArray(TablesJson(tables), 4))
          .Add("samples", ResultsJson(result.samples))
          .Render(2) +
      "\n";
  WriteJsonFile(path, json, kWho);
}

// The hit-rate case on the CPU cache, when the GPU cases did not run.
void RunCpuCases(const CacheBenchOptions& o, engine::Engine& engine, const std::string& why,
                 CacheCasesResult* result) {
  std::vector<std::string> gpu_cases;
  for (const auto& [on, name] :
       {std::pair{o.prefetch, "prefetch"}, std::pair{o.all_hit, "all_hit"},
        std::pair{o.passes, "passes"}, std::pair{o.oversize, "oversize"}}) {
    if (on) gpu_cases.push_back(name);
  }
  if (!gpu_cases.empty()) {
    Table table;
    table.title = "GPU cases: " + absl::StrJoin(gpu_cases, ", ");
    table.notes.push_back("not run: " + why);
    result->tables.push_back(std::move(table));
    absl::FPrintF(stderr, "[%s] GPU cases not run: %s\n", kWho, why);
  }
  if (!o.hit_rate) return;
  try {
    RunHitRateCase(o, engine, engine::Context::CPU(), result);
  } catch (const std::exception& e) {
    result->failed = true;
    Table table;
    table.title = "Case hit_rate (CPU cache)";
    table.notes.push_back(absl::StrCat("FAILED: ", e.what()));
    result->tables.push_back(std::move(table));
  }
}

int Main(const CacheBenchOptions& o, const std::string& json_path) {
  const MachineInfo machine = MachineInfo::Read();
  const OtherProcessesMeter meter;
  std::unique_ptr<engine::Engine> engine = engine::CreateEngine(engine::ParseEngineType(o.engine));
  CacheCasesResult result;
  result.summary = SummaryTable(o);
  std::string why = "--device=cpu";
  if (!o.on_gpu || !RunGpuCases(o, *engine, &result, &why)) RunCpuCases(o, *engine, why, &result);
  try {
    engine->WaitForAll();
  } catch (const std::exception& e) {  // an error no case waited for
    result.failed = true;
    result.summary.notes.push_back(absl::StrCat("unreported engine error: ", e.what()));
  }
  for (const Table& table : result.tables) result.ran |= !table.rows.empty();
  if (!result.ran) {
    PrintTables(result.tables);
    absl::PrintF("%s: nothing measured\n", kWho);
    if (!json_path.empty()) WriteJson(json_path, o, machine, result);
    return kSkipped;
  }
  Table& summary = result.summary;
  if (!result.device.empty()) summary.notes.push_back("device: " + result.device);
  summary.notes.push_back(absl::StrCat("host ", machine.Note()));
  summary.notes.push_back(meter.Note(kWho));
  summary.notes.push_back(absl::StrFormat(
      "engine %s; times: host clock around engine pushes and a WaitForVar on what they write "
      "(references: CUDA events); median of %d runs after %d untimed",
      o.engine, o.repeat, o.warmup));
  std::vector<Table> tables = result.tables;
  tables.push_back(summary);
  PrintTables(tables);
  if (!json_path.empty()) WriteJson(json_path, o, machine, result);
  if (result.failed) {
    absl::PrintF("\n%s: a check failed or a case failed (see above)\n", kWho);
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace ember::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "The embedding cache against what bounds it: prefetch vs host-to-GPU bandwidth, all-hit "
      "prefetch and cached forward vs ops' GPU TBE forward, prefetch temporaries per pass count, "
      "hit rate vs exact LRU and Belady, tables larger than the GPU.\n"
      "Usage: ember-bench-cache [--quick] [--device=gpu|cpu] [--cases=prefetch,all_hit,passes,"
      "hit_rate,oversize] [--json=PATH]\n"
      "Exit status: 0 ran, 1 a check failed, 2 error, 77 nothing measured.");
  absl::ParseCommandLine(argc, argv);
  try {
    // Bad input fails here, at once, not after the cases ran.
    ember::tools::CheckEnvironment();
    ember::tools::CheckWritableFile("--json", absl::GetFlag(FLAGS_json));
    return ember::bench::Main(ember::bench::OptionsFromFlags(), absl::GetFlag(FLAGS_json));
  } catch (const std::exception& e) {
    absl::FPrintF(stderr, "ember-bench-cache: %s\n", e.what());
    return 2;
  }
}
