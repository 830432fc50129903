// ember-bench-storage: allocation and free throughput and latency of Ember's
// device pool and of Ember over CUDA's stream-ordered allocator, side by side
// with raw cudaMallocAsync (a caching pool of its own) and plain
// cudaMalloc/cudaFree: the same sizes in the same order, the median of
// --repeat runs round-robin over the columns, warm-up untimed. The cases
// and columns are in storage_cases.h; the table and targets print as every
// bench's do (common/table_printer.h), and --json=PATH writes them with
// every run's figures (common/json_writer.h).
//
// Exit status: 0 when the cases ran (whatever the targets say), 2 for an
// error (a failed CUDA call names it), 77 when nothing could be measured: no
// CUDA device, or a build without CUDA (77 is CTest's and Automake's
// "skipped").

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
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
#include "tools/bench/common/json_writer.h"
#include "tools/bench/common/machine_notes.h"
#include "tools/bench/common/table_printer.h"
#include "tools/bench/storage/storage_cases.h"
#include "tools/train/tool_checks.h"

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

constexpr char kWho[] = "ember-bench-storage";
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

std::string OptionsJson(const StorageBenchOptions& o) {
  std::vector<std::string> cases;
  if (o.reuse) cases.push_back("reuse");
  if (o.busy) cases.push_back("busy");
  if (o.threaded) cases.push_back("threads");
  std::vector<std::string> sizes;
  for (std::size_t size : o.sizes) sizes.push_back(absl::StrCat(size));
  return JsonObject()
      .Add("allocators", JsonStrings(o.allocators))
      .Add("cases", JsonStrings(cases))
      .Add("sizes", JsonArray(sizes))
      .Add("pairs", absl::StrCat(o.pairs))
      .Add("live", absl::StrCat(o.live))
      .Add("busy_us", absl::StrCat(o.busy_us))
      .Add("busy_samples", absl::StrCat(o.busy_samples))
      .Add("busy_bytes", absl::StrCat(o.busy_bytes))
      .Add("threads", absl::StrCat(o.threads))
      .Add("thread_pairs", absl::StrCat(o.thread_pairs))
      .Add("repeat", absl::StrCat(o.repeat))
      .Add("profile", JsonString(o.profile_path))
      .Add("profile_engine", JsonString(o.profile_engine))
      .Render(4);
}

void WriteJson(const std::string& path, const StorageBenchOptions& options,
               const MachineInfo& machine, const StorageCasesResult& result) {
  std::vector<Table> tables;
  if (result.skipped.empty()) tables.push_back(result.table);
  const std::string json =
      JsonObject()
          .Add("benchmark", JsonString(kWho))
          .Add("options", OptionsJson(options))
          .Add("machine", machine.Json())
          .Add("device", result.device.empty() ? "null" : JsonString(result.device))
          .Add("skipped", result.skipped.empty() ? "null" : JsonString(result.skipped))
          .Add("tables", JsonArray(TablesJson(tables), 4))
          .Add("samples", ResultsJson(result.samples))
          .Render(2) +
      "\n";
  WriteJsonFile(path, json, kWho);
}

int Main(const StorageBenchOptions& options, const std::string& json_path) {
  const MachineInfo machine = MachineInfo::Read();
  StorageCasesResult result = RunStorageCases(options);
  if (!result.skipped.empty()) {
    absl::PrintF("%s: nothing measured: %s\n", kWho, result.skipped);
    if (!json_path.empty()) WriteJson(json_path, options, machine, result);
    return kSkipped;
  }
  result.table.notes.push_back(absl::StrCat("host ", machine.Note()));
  PrintTable(result.table);
  if (!json_path.empty()) WriteJson(json_path, options, machine, result);
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
    // Bad input fails here, at once, not after the cases ran.
    ember::tools::CheckEnvironment();
    ember::tools::CheckWritableFile("--json", absl::GetFlag(FLAGS_json));
    ember::tools::CheckWritableFile("--profile", absl::GetFlag(FLAGS_profile));
    return ember::bench::Main(ember::bench::OptionsFromFlags(), absl::GetFlag(FLAGS_json));
  } catch (const std::exception& e) {
    absl::FPrintF(stderr, "ember-bench-storage: %s\n", e.what());
    return 2;
  }
}
