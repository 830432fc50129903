// ember-bench-storage: allocation and free throughput and latency of Ember's
// device pool and of Ember over CUDA's stream-ordered allocator, side by side
// with raw cudaMallocAsync (a caching pool of its own) and plain
// cudaMalloc/cudaFree: the same sizes in the same order, the median of
// --repeat runs round-robin over the columns, warm-up untimed. The cases
// and columns are in storage_cases.h; the table and targets print like
// ember-bench-engine's (bench_report.h), and --json=PATH writes them with
// every run's figures.
//
// Exit status: 0 when the cases ran (whatever the targets say), 2 for an
// error (a failed CUDA call names it), 77 when nothing could be measured: no
// CUDA device, or a build without CUDA (77 is CTest's and Automake's
// "skipped").

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
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
#include "engine/engine.h"
#include "engine/error.h"
#include "tools/bench/bench_report.h"
#include "tools/bench/storage_cases.h"

ABSL_FLAG(std::vector<std::string>, allocators,
          std::vector<std::string>({"round", "cuda_async", "malloc_async", "malloc"}),
          "columns: round (Ember pool, kRound), cuda_async (Ember, kCudaAsync), malloc_async "
          "(raw cudaMallocAsync, caching pool), malloc (cudaMalloc/cudaFree)");
ABSL_FLAG(std::vector<std::string>, cases, std::vector<std::string>({"reuse", "busy", "threads"}),
          "cases to run: reuse, busy, threads (the profile case runs with --profile)");
ABSL_FLAG(std::vector<std::string>, sizes,
          std::vector<std::string>({"4K", "12K", "64K", "200K", "1M", "3M", "16M", "64M"}),
          "sizes of the reuse and threads cases, bytes with an optional K, M or G suffix");
ABSL_FLAG(int, pairs, 10'000, "alloc+free pairs per run of the reuse case");
ABSL_FLAG(int, live, 4, "buffers alive at once in the reuse and threads cases (per thread)");
ABSL_FLAG(int, busy_us, 5'000, "kernel length of the busy case, in us");
ABSL_FLAG(int, busy_samples, 20, "frees per run of the busy case (and of the profile case)");
ABSL_FLAG(std::string, busy_bytes, "1M", "buffer size of the busy case");
ABSL_FLAG(int, threads, 4, "threads of the threads case");
ABSL_FLAG(int, thread_pairs, 10'000, "alloc+free pairs per thread and run of the threads case");
ABSL_FLAG(int, repeat, 5, "runs of every case");
ABSL_FLAG(std::string, json, "", "also write the table, the targets and every run's figure here");
ABSL_FLAG(std::string, profile, "",
          "when set, also run the busy case through an engine with profiling and write its "
          "Chrome trace here (read back for the trace rows)");
ABSL_FLAG(std::string, profile_engine, "ThreadedEnginePerDeviceAsync",
          "the engine of the profile case, by ENGINE_TYPE name");

namespace ember::bench {
namespace {

constexpr int kSkipped = 77;

// "4096", "4K", "64M", "1G" in bytes.
std::size_t ParseSize(const char* flag, const std::string& text) {
  std::string digits = text;
  std::size_t scale = 1;
  if (!digits.empty()) {
    switch (std::toupper(static_cast<unsigned char>(digits.back()))) {
      case 'K':
        scale = std::size_t{1} << 10;
        break;
      case 'M':
        scale = std::size_t{1} << 20;
        break;
      case 'G':
        scale = std::size_t{1} << 30;
        break;
      default:
        break;
    }
    if (scale != 1) digits.pop_back();
  }
  uint64_t value = 0;
  if (!absl::SimpleAtoi(digits, &value) || value == 0) {
    throw InvalidArgument(absl::StrCat("[ember-bench-storage] --", flag, ": '", text,
                                       "' is not a size in bytes (e.g. 4096, 64K, 16M)"));
  }
  return value * scale;
}

int Positive(const char* flag, int value) {
  if (value < 1) {
    throw InvalidArgument(
        absl::StrCat("[ember-bench-storage] --", flag, "=", value, ": must be at least 1"));
  }
  return value;
}

StorageBenchOptions OptionsFromFlags() {
  StorageBenchOptions options;
  options.allocators = absl::GetFlag(FLAGS_allocators);
  for (const std::string& name : options.allocators) {
    if (std::find(std::begin(kAllocatorNames), std::end(kAllocatorNames), name) ==
        std::end(kAllocatorNames)) {
      throw InvalidArgument(absl::StrCat("[ember-bench-storage] unknown allocator '", name,
                                         "'; valid: ", absl::StrJoin(kAllocatorNames, ", ")));
    }
  }
  options.reuse = options.busy = options.threaded = false;
  for (const std::string& name : absl::GetFlag(FLAGS_cases)) {
    if (name == "reuse") {
      options.reuse = true;
    } else if (name == "busy") {
      options.busy = true;
    } else if (name == "threads") {
      options.threaded = true;
    } else {
      throw InvalidArgument(absl::StrCat("[ember-bench-storage] unknown case '", name,
                                         "'; valid: reuse, busy, threads"));
    }
  }
  for (const std::string& size : absl::GetFlag(FLAGS_sizes)) {
    options.sizes.push_back(ParseSize("sizes", size));
  }
  if (options.sizes.empty()) throw InvalidArgument("[ember-bench-storage] --sizes is empty");
  options.pairs = Positive("pairs", absl::GetFlag(FLAGS_pairs));
  options.live = Positive("live", absl::GetFlag(FLAGS_live));
  options.busy_us = Positive("busy_us", absl::GetFlag(FLAGS_busy_us));
  options.busy_samples = Positive("busy_samples", absl::GetFlag(FLAGS_busy_samples));
  options.busy_bytes =
      std::max<std::size_t>(sizeof(int), ParseSize("busy_bytes", absl::GetFlag(FLAGS_busy_bytes)));
  options.threads = Positive("threads", absl::GetFlag(FLAGS_threads));
  options.thread_pairs = Positive("thread_pairs", absl::GetFlag(FLAGS_thread_pairs));
  options.repeat = Positive("repeat", absl::GetFlag(FLAGS_repeat));
  options.profile_path = absl::GetFlag(FLAGS_profile);
  options.profile_engine = absl::GetFlag(FLAGS_profile_engine);
  engine::ParseEngineType(options.profile_engine);  // throws if bad
  return options;
}

// ---------------------------------------------------------------------------
// JSON, by hand; every string here is plain ASCII.

std::string JsonNumber(double value) {
  return std::isfinite(value) ? absl::StrFormat("%.10g", value) : "null";
}

std::string JsonList(const std::vector<std::string>& values) {
  std::vector<std::string> items;
  for (const std::string& value : values) items.push_back(JsonString(value));
  return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
}

std::string JsonOptions(const StorageBenchOptions& o) {
  std::vector<std::string> cases;
  if (o.reuse) cases.push_back("reuse");
  if (o.busy) cases.push_back("busy");
  if (o.threaded) cases.push_back("threads");
  return absl::StrFormat(
      "{\"allocators\": %s, \"cases\": %s, \"sizes\": [%s], \"pairs\": %d, \"live\": %d, "
      "\"busy_us\": %d, \"busy_samples\": %d, \"busy_bytes\": %d, \"threads\": %d, "
      "\"thread_pairs\": %d, \"repeat\": %d, \"profile\": %s, \"profile_engine\": %s}",
      JsonList(o.allocators), JsonList(cases), absl::StrJoin(o.sizes, ", "), o.pairs, o.live,
      o.busy_us, o.busy_samples, o.busy_bytes, o.threads, o.thread_pairs, o.repeat,
      JsonString(o.profile_path), JsonString(o.profile_engine));
}

std::string JsonTable(const ExtraTable& table) {
  std::vector<std::string> rows;
  for (const ExtraTable::Row& row : table.rows) {
    std::vector<std::string> values;
    for (const auto& [column, value] : row.values) {
      values.push_back(absl::StrCat(JsonString(column), ": ", JsonNumber(value)));
    }
    rows.push_back(absl::StrFormat(
        "      {\"case\": %s, \"label\": %s, \"unit\": %s, \"values\": {%s}}", JsonString(row.key),
        JsonString(row.label), JsonString(row.unit), absl::StrJoin(values, ", ")));
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
    if (unit.empty()) continue;  // its case did not run; the printed targets skip it too
    const bool pass =
        measured && (target.at_least ? *measured >= target.goal : *measured <= target.goal);
    targets.push_back(absl::StrFormat(
        "      {\"name\": %s, \"column\": %s, \"case\": %s, \"unit\": %s, \"goal\": %s, "
        "\"at_least\": %s, \"measured\": %s, \"pass\": %s}",
        JsonString(target.name), JsonString(table.target_engine), JsonString(target.key),
        JsonString(unit), JsonNumber(target.goal), target.at_least ? "true" : "false",
        measured ? JsonNumber(*measured) : "null", pass ? "true" : "false"));
  }
  std::vector<std::string> notes;
  for (const std::string& note : table.notes) notes.push_back(JsonString(note));
  return absl::StrFormat(
      "    {\"title\": %s, \"target_column\": %s, \"columns\": %s, \"notes\": [%s],\n"
      "     \"rows\": [\n%s\n     ],\n     \"targets\": [\n%s\n     ]}",
      JsonString(table.title), JsonString(table.target_engine), JsonList(table.columns),
      absl::StrJoin(notes, ", "), absl::StrJoin(rows, ",\n"), absl::StrJoin(targets, ",\n"));
}

std::string JsonSamples(const StorageSamples& samples) {
  std::vector<std::string> items;
  for (const auto& [key, values] : samples) {
    std::vector<std::string> numbers;
    for (double value : values) numbers.push_back(JsonNumber(value));
    items.push_back(absl::StrFormat("    {\"case\": %s, \"column\": %s, \"runs\": [%s]}",
                                    JsonString(key.first), JsonString(key.second),
                                    absl::StrJoin(numbers, ", ")));
  }
  return absl::StrJoin(items, ",\n");
}

void WriteJson(const std::string& path, const StorageBenchOptions& options,
               const StorageCasesResult& result) {
  const std::string json = absl::StrFormat(
      "{\n  \"benchmark\": \"ember-bench-storage\",\n  \"options\": %s,\n"
      "  \"hardware_threads\": %d,\n  \"device\": %s,\n  \"skipped\": %s,\n"
      "  \"tables\": [\n%s\n  ],\n  \"samples\": [\n%s\n  ]\n}\n",
      JsonOptions(options), std::thread::hardware_concurrency(),
      result.device.empty() ? "null" : JsonString(result.device),
      result.skipped.empty() ? "null" : JsonString(result.skipped),
      result.skipped.empty() ? JsonTable(result.table) : "", JsonSamples(result.samples));
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr || std::fputs(json.c_str(), file) < 0 || std::fclose(file) != 0) {
    throw Error(absl::StrCat("[ember-bench-storage] cannot write --json=", path));
  }
}

int Main(const StorageBenchOptions& options, const std::string& json_path) {
  const StorageCasesResult result = RunStorageCases(options);
  if (!result.skipped.empty()) {
    absl::PrintF("ember-bench-storage: nothing measured: %s\n", result.skipped);
    if (!json_path.empty()) WriteJson(json_path, options, result);
    return kSkipped;
  }
  ReportSpec spec;  // no rows of its own: the report prints the storage table alone
  spec.target_engine = result.table.target_engine;
  spec.tables.push_back(result.table);
  Report(spec, Results(), /*json_path=*/"");
  if (!json_path.empty()) WriteJson(json_path, options, result);
  return 0;
}

}  // namespace
}  // namespace ember::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Device allocation and free: Ember's pool, Ember over cudaMallocAsync, raw cudaMallocAsync "
      "and cudaMalloc/cudaFree, side by side.\n"
      "Usage: ember-bench-storage [--cases=reuse,busy,threads] [--allocators=A,B] [--repeat=R] "
      "[--profile=TRACE.json] [--json=PATH]\n"
      "Exit status: 0 ran, 2 error, 77 nothing measured (no CUDA device or no CUDA build).");
  absl::ParseCommandLine(argc, argv);
  try {
    return ember::bench::Main(ember::bench::OptionsFromFlags(), absl::GetFlag(FLAGS_json));
  } catch (const std::exception& e) {
    absl::FPrintF(stderr, "ember-bench-storage: %s\n", e.what());
    return 2;
  }
}
