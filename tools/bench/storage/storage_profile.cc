// The profile case of ember-bench-storage (storage_cases.h): the busy case
// as a training runtime does it, through an engine with profiling, and the
// engine's Chrome trace read back to show that the free did not wait.
//
// Per sample: a GPU op orders the buffer's first use on its stream and
// launches the kernel that writes it; then DeleteVariable on the GPU context
// frees the buffer after RecordUse on the delete op's stream (which the
// engine has made wait for the kernel op). In an Async engine nothing waits
// on the host, so the delete op's host span is microseconds long and ends
// while the kernel op's GPU span still runs.

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/engine.h"
#include "engine/error.h"
#include "storage/storage.h"
#include "tools/bench/storage/storage_cuda.h"

namespace ember::bench::storage_bench {
namespace {

constexpr char kBusyPrefix[] = "busy kernel: ";
constexpr char kWarmUpPrefix[] = "warm-up kernel: ";

// A complete event ("ph":"X") of the trace, in microseconds.
struct Span {
  std::string name;
  std::string cat;
  double ts = 0;
  double dur = 0;
  [[nodiscard]] double end() const { return ts + dur; }
};

// The value of `"key":"..."` in one event of the trace; our names need no
// escapes.
std::string StringField(std::string_view line, std::string_view key) {
  const std::string open = "\"" + std::string(key) + "\":\"";
  const std::size_t begin = line.find(open);
  if (begin == std::string_view::npos) return "";
  const std::size_t from = begin + open.size();
  const std::size_t end = line.find('"', from);
  return std::string(line.substr(from, end == std::string_view::npos ? end : end - from));
}

double NumberField(std::string_view line, std::string_view key) {
  const std::string open = "\"" + std::string(key) + "\":";
  const std::size_t begin = line.find(open);
  if (begin == std::string_view::npos) return 0;
  return std::strtod(std::string(line.substr(begin + open.size(), 32)).c_str(), nullptr);
}

// The complete spans of the trace at `path`; the engine's profiler writes
// one event a line (docs/profiling.md).
std::vector<Span> ReadSpans(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(absl::StrCat("[ember-bench-storage] cannot read the profile '", path, "'"));
  std::vector<Span> spans;
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"ph\":\"X\"") == std::string::npos) continue;
    spans.push_back({StringField(line, "name"), StringField(line, "cat"), NumberField(line, "ts"),
                     NumberField(line, "dur")});
  }
  return spans;
}

// One sample, waited for. The buffer is shared by the two ops, which the
// engine runs one after the other.
void RunSample(engine::Engine& engine, storage::StorageManager& manager, std::size_t bytes, int us,
               const std::string& op_name) {
  const engine::VarHandle var = engine.NewVariable();
  auto buffer = std::make_shared<storage::Buffer>(manager.Alloc(bytes));
  engine.PushAsync(
      [buffer, us](engine::RunContext ctx, const engine::OnStart& on_start,
                   const engine::OnComplete& on_complete) {
        on_start();
        buffer->OrderFirstUse(ctx.stream);
        LaunchBusyKernel(static_cast<cudaStream_t>(ctx.stream), buffer->data(), us);
        on_complete();
      },
      {}, {var}, {.ctx = engine::Context::GPU(0), .name = op_name});
  engine.DeleteVariable(
      var,
      [buffer](engine::RunContext ctx) {
        buffer->RecordUse(ctx.stream);
        buffer->Reset();
      },
      engine::Context::GPU(0));
  engine.WaitForAll();
}

bool StartsWith(const std::string& text, std::string_view prefix) {
  return std::string_view(text).starts_with(prefix);
}

}  // namespace

void RunProfileCase(const StorageBenchOptions& options, const std::vector<EmberColumn>& columns,
                    Results* samples, std::vector<std::string>* notes) {
  if (columns.empty()) {
    notes->push_back("profile: skipped, --allocators has no Ember column");
    return;
  }
  const int k = options.busy_samples;
  absl::FPrintF(stderr, "[ember-bench-storage] profile: %s, %d samples per Ember column -> %s\n",
                options.profile_engine, k, options.profile_path);
  engine::EngineOptions engine_options = engine::ParseEngineType(options.profile_engine);
  engine_options.profile_path = options.profile_path;
  {
    std::unique_ptr<engine::Engine> engine = engine::CreateEngine(engine_options);
    for (const EmberColumn& column : columns) {
      storage::StorageOptions storage_options;
      storage_options.device_pool = column.pool;
      std::unique_ptr<storage::StorageManager> manager =
          storage::CreateStorageManager(storage::MemoryKind::kDevice, 0, storage_options);
      RunSample(*engine, *manager, options.busy_bytes, options.busy_us,
                absl::StrCat(kWarmUpPrefix, column.name));
      for (int i = 0; i < k; ++i) {
        RunSample(*engine, *manager, options.busy_bytes, options.busy_us,
                  absl::StrCat(kBusyPrefix, column.name));
      }
    }
  }  // the engine writes the profile as it goes

  // Each column ran a warm-up and k samples, one at a time: the spans in
  // time order are the samples in the order they ran.
  std::vector<Span> deletes;
  std::vector<Span> kernels;
  for (Span& span : ReadSpans(options.profile_path)) {
    if (span.name == "DeleteVariable" && span.cat != "gpu") {
      deletes.push_back(std::move(span));
    } else if (span.cat == "gpu" &&
               (StartsWith(span.name, kBusyPrefix) || StartsWith(span.name, kWarmUpPrefix))) {
      kernels.push_back(std::move(span));
    }
  }
  auto by_start = [](const Span& a, const Span& b) { return a.ts < b.ts; };
  std::sort(deletes.begin(), deletes.end(), by_start);
  std::sort(kernels.begin(), kernels.end(), by_start);
  const std::size_t expected = columns.size() * (k + 1);
  if (deletes.size() != expected || kernels.size() != expected) {
    notes->push_back(absl::StrFormat(
        "profile: %s holds %d DeleteVariable host spans and %d kernel GPU spans, expected %d "
        "each; no figures taken from it",
        options.profile_path, deletes.size(), kernels.size(), expected));
    return;
  }
  for (std::size_t c = 0; c < columns.size(); ++c) {
    const std::string& column = columns[c].name;
    std::vector<double> host_us;
    std::vector<double> gpu_us;
    int overlap = 0;
    for (int i = 1; i <= k; ++i) {
      const std::size_t at = c * (k + 1) + i;
      if (kernels[at].name != absl::StrCat(kBusyPrefix, column)) {
        throw Error(absl::StrCat("[ember-bench-storage] profile: span ", at, " is '",
                                 kernels[at].name, "', expected the kernel of ", column));
      }
      host_us.push_back(deletes[at].dur);
      gpu_us.push_back(kernels[at].dur);
      overlap += deletes[at].end() < kernels[at].end() ? 1 : 0;
    }
    samples->Add("trace_delete_p50", column, Percentile(host_us, 0.5));
    samples->Add("trace_delete_max", column, *std::max_element(host_us.begin(), host_us.end()));
    samples->Add("trace_kernel_p50", column, Percentile(gpu_us, 0.5));
    samples->Add("trace_overlap_pct", column, 100.0 * overlap / k);
    absl::FPrintF(stderr,
                  "[ember-bench-storage] profile %-12s delete host span p50 %.2f us, kernel GPU "
                  "span p50 %.0f us, delete ended first in %d of %d\n",
                  column, Percentile(host_us, 0.5), Percentile(gpu_us, 0.5), overlap, k);
  }
  notes->push_back(absl::StrFormat(
      "profile: %s (%s, %d samples per Ember column after a warm-up; spans 'busy kernel: "
      "<column>' on the stream rows, 'DeleteVariable' on the ember-gpu0 rows); open it in "
      "ui.perfetto.dev",
      options.profile_path, options.profile_engine, k));
}

}  // namespace ember::bench::storage_bench
