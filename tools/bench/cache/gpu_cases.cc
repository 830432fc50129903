// RunGpuCases (cache_cases.h): the device, the host-to-GPU references, then
// each GPU case in turn. A case that cannot run leaves a table saying why:
// Unavailable (the cache's CUDA kernels or the cached forward missing, too
// little memory) reads "not run"; any other error "failed" and fails the
// run. Between cases every tensor goes and the device pool gives its cache
// back.

#include <cstdio>
#include <exception>
#include <optional>
#include <string>

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/error.h"
#include "storage/storage.h"
#include "tools/bench/cache/cache_cases.h"
#include "tools/bench/cache/gpu_run.h"
#include "tools/bench/cache/h2d_bandwidth.h"
#include "tools/bench/common/cuda_device.h"

namespace ember::bench {
namespace cache_bench {
namespace {

void MeasureH2d(GpuRun& run) {
  const CacheBenchOptions& o = run.o;
  const int64_t row_bytes = int64_t{o.prefetch_shape.dim} * 4;
  // Never more managed memory than half the GPU's free memory (storage's
  // rule for a managed home).
  const bool managed = double(o.h2d_bytes) <= double(storage::DeviceFreeBytes(0)) / 2;
  H2dProbe probe(static_cast<std::size_t>(o.h2d_bytes), row_bytes, o.seed, managed);
  const double bytes = double(probe.bytes());
  for (int i = 0; i < std::max(o.warmup, 1); ++i) {
    probe.MemcpyMs();
    probe.ZeroCopyMs();
    probe.ZeroCopyRowsMs();
    if (managed) probe.ManagedRowsMs();
  }
  Results& samples = run.result.samples;
  for (int r = 0; r < o.repeat; ++r) {  // round-robin: a slow spell hits all three
    samples.Add("h2d.memcpy_gbs", "reference", bytes / probe.MemcpyMs() / 1e6);
    samples.Add("h2d.zero_copy_gbs", "reference", bytes / probe.ZeroCopyMs() / 1e6);
    samples.Add("h2d.rows_gbs", "reference", bytes / probe.ZeroCopyRowsMs() / 1e6);
    if (managed)
      samples.Add("h2d.managed_rows_gbs", "reference", bytes / probe.ManagedRowsMs() / 1e6);
  }
  run.h2d.memcpy_gbs = *samples.Get("h2d.memcpy_gbs", "reference");
  run.h2d.zero_copy_gbs = *samples.Get("h2d.zero_copy_gbs", "reference");
  run.h2d.rows_gbs = *samples.Get("h2d.rows_gbs", "reference");
  absl::FPrintF(stderr,
                "[%s] H2D over %s: cudaMemcpyAsync %.1f GB/s, zero-copy %.1f GB/s, zero-copy %d B "
                "rows %.1f GB/s (of managed memory: %.1f GB/s)\n",
                kWho, Gib(bytes), run.h2d.memcpy_gbs, run.h2d.zero_copy_gbs, row_bytes,
                run.h2d.rows_gbs, samples.Get("h2d.managed_rows_gbs", "reference").value_or(0));
}

// Drains the engine after a case (reporting nothing: a failed case already
// said why) and gives the device pool's cache back.
void Drain(engine::Engine& engine) {
  try {
    engine.WaitForAll();
  } catch (const std::exception&) {  // the case's own error, already recorded
  }
  storage::GetStorage(storage::MemoryKind::kDevice, 0).ReleaseCached();
}

void RunGuarded(GpuRun& run, const char* name, void (*run_case)(GpuRun&)) {
  auto skipped = [&](const std::string& what) {
    Table table;
    table.title = absl::StrCat("Case ", name);
    table.notes.push_back(what);
    run.result.tables.push_back(std::move(table));
    absl::FPrintF(stderr, "[%s] %s: %s\n", kWho, name, what);
  };
  try {
    run_case(run);
  } catch (const Unavailable& e) {
    skipped(absl::StrCat("not run: ", e.what()));
  } catch (const std::exception& e) {
    run.result.failed = true;
    skipped(absl::StrCat("FAILED: ", e.what()));
  }
  Drain(run.engine);
}

void HitRateOnGpu(GpuRun& run) {
  RunHitRateCase(run.o, run.engine, engine::Context::GPU(0), &run.result);
}

}  // namespace
}  // namespace cache_bench

bool RunGpuCases(const CacheBenchOptions& options, engine::Engine& engine, CacheCasesResult* result,
                 std::string* why) {
  using namespace cache_bench;  // NOLINT: this folder's helpers
  const std::optional<std::string> device = DescribeDevice0(why);
  if (!device) return false;
  result->device = *device;
  absl::FPrintF(stderr, "[%s] on %s\n", kWho, *device);
  GpuRun run{options, engine, *result, {}, 0};
  std::size_t free = 0;
  std::size_t total = 0;
  CheckCuda(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  run.gpu_total_bytes = double(total);
  if (options.prefetch || options.oversize) MeasureH2d(run);
  if (options.prefetch) RunGuarded(run, "prefetch", RunPrefetchCase);
  if (options.all_hit) RunGuarded(run, "all_hit", RunAllHitCase);
  if (options.passes) RunGuarded(run, "passes", RunPassesCase);
  if (options.hit_rate) RunGuarded(run, "hit_rate", HitRateOnGpu);
  // Last: its host-mapped table stays cached by the cache's home manager.
  if (options.oversize) RunGuarded(run, "oversize", RunOversizeCase);
  return true;
}

}  // namespace ember::bench
