// The passes case (cache_cases.h): what a prefetch borrows beyond the cache
// itself, per index of its batch, at M = --passes passes, and its time.
//
// Per M a cache of its own (CacheOptions::prefetch_passes = M) gets a
// device storage manager of the bench's own as `device_memory`: its slots,
// state, locations and every temporary of its prefetches come from there,
// and nothing else does. The manager's pool is kNaive (exact sizes, rounded
// to the page), so `allocated` is what was asked for. After a warm-up that
// fills the cache, ResetPeaks; then --repeat runs of --passes_steps
// training steps (a backward dirties each batch's rows, so that evictions
// write them home) of --passes_batches distinct Zipf batches (gpu_run.h,
// StepLoop). The
// prefetch's temporaries are the peak of `allocated` over those steps less
// what was allocated before them (the cache itself: no prefetch's
// temporaries live between steps, as each prefetch frees its own before
// the next starts).

#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "storage/storage.h"
#include "tools/bench/cache/gpu_run.h"
#include "tools/bench/common/table_printer.h"

namespace ember::bench::cache_bench {
namespace {

constexpr engine::Context kGpu = engine::Context::GPU(0);

std::string Column(int passes) { return absl::StrCat("M=", passes); }

// One M: its figures into `samples` under Column(passes).
void RunPasses(GpuRun& run, int passes, const std::vector<BatchTensors>& batches,
               std::vector<std::string>* notes) {
  const CacheBenchOptions& o = run.o;
  const CacheShape& s = o.shape;
  const std::string column = Column(passes);
  storage::StorageOptions pool = storage::StorageOptions::FromEnv();
  pool.device_pool = storage::DevicePoolType::kNaive;
  std::unique_ptr<storage::StorageManager> memory =
      storage::CreateStorageManager(storage::MemoryKind::kDevice, 0, pool);
  {
    cache::CacheOptions options;
    options.ctx = kGpu;
    options.home = cache::HomeMemory::kMapped;
    options.staging_bytes = o.staging_bytes;
    options.load_factor = o.passes_load_factor;
    options.prefetch_passes = passes;
    cache::CachedTbe tbe(run.engine,
                         ops::TbeTables(std::vector<int64_t>(s.tables, s.rows),
                                        std::vector<int64_t>(s.tables, s.dim)),
                         options, memory.get());
    cache::CacheLocations locations = tbe.NewLocations(s.indices());
    const storage::Tensor grad = ZeroGrad(run.engine, tbe, s.batch);
    const StepWork train{.grad = &grad};
    const int warm_steps = 2 * o.passes_batches + o.warmup;
    (void)StepLoop(tbe, batches, 0, warm_steps, locations, train);
    run.engine.WaitForAll();
    const std::size_t base = memory->Stats().allocated;
    memory->ResetPeaks();
    Results& samples = run.result.samples;
    for (int r = 0; r < o.repeat; ++r) {
      const StepTotals t =
          StepLoop(tbe, batches, warm_steps + r * o.passes_steps, o.passes_steps, locations, train);
      samples.Add("passes.step_ms", column, t.prefetch_ms / t.steps);
      samples.Add("passes.hit_rate", column, 100 * t.counts.hit_rate());
    }
    const double temporaries = double(memory->Stats().peak_allocated - base);
    samples.Add("passes.temp_mib", column, temporaries / double(1 << 20));
    samples.Add("passes.temp_per_index", column, temporaries / double(s.indices()));
    samples.Add("passes.cache_mib", column, double(base) / double(1 << 20));
    notes->push_back(
        absl::StrFormat("%s: PassesFor(%d) = %d", column, s.indices(), tbe.PassesFor(s.indices())));
    absl::FPrintF(stderr, "[%s] passes M=%d: %.3f ms a prefetch, %.1f B of temporaries per index\n",
                  kWho, passes, *samples.Get("passes.step_ms", column),
                  temporaries / double(s.indices()));
  }
  run.engine.WaitForAll();  // the cache's tensors go back to `memory` before it goes
  memory->ReleaseCached();
}

}  // namespace

void RunPassesCase(GpuRun& run) {
  const CacheBenchOptions& o = run.o;
  const CacheShape& s = o.shape;
  const ZipfRows zipf(s.rows, s.zipf);
  std::vector<BatchTensors> batches;
  for (int k = 0; k < o.passes_batches; ++k) {
    batches.push_back(Upload(run.engine, MakeBatch(s, zipf, o.seed, 1000 + k), kGpu));
  }
  Table table;
  table.title = absl::StrFormat("Prefetch passes: %s (%s lookups), cache %.0f%% of rows", s.Name(),
                                WithCommas(double(s.indices())), 100 * o.passes_load_factor);
  for (int m : o.passes_list) table.columns.push_back(Column(m));
  for (int m : o.passes_list) RunPasses(run, m, batches, &table.notes);

  Results& samples = run.result.samples;
  const std::optional<double> one = samples.Get("passes.step_ms", Column(1));
  for (int m : o.passes_list) {
    const std::optional<double> ms = samples.Get("passes.step_ms", Column(m));
    if (one && ms) samples.Add("passes.time_over_m1", Column(m), *ms / *one);
  }
  table.AddRow(samples, "passes.step_ms", "ms", "prefetch, steady state");
  table.AddRow(samples, "passes.time_over_m1", "x", "  time / M=1");
  table.AddRow(samples, "passes.hit_rate", "%", "  hit rate (distinct rows)");
  table.AddRow(samples, "passes.temp_mib", "MiB", "peak prefetch temporaries");
  table.AddRow(samples, "passes.temp_per_index", "B", "  per index of the batch");
  table.AddRow(samples, "passes.cache_mib", "MiB", "the cache itself (not counted)");
  table.notes.push_back(absl::StrFormat(
      "temporaries: peak_allocated of the cache's own device manager (kNaive) over the timed "
      "steps, less what it held before them; %d distinct batches cycled, a step = prefetch "
      "(timed) + relookup and an SGD backward (untimed: it dirties the batch's rows); time / "
      "M=1: ratio of medians",
      o.passes_batches));
  for (int m : o.passes_list) {
    if (auto v = table.Value("passes.temp_per_index", Column(m))) {
      run.result.summary.AddRow({TempPerIndexKey(m),
                                 "B",
                                 absl::StrFormat("prefetch temporaries per index, M=%d", m),
                                 {{"measured", *v}}});
    }
  }
  for (int m : o.passes_list) {
    if (auto v = table.Value("passes.time_over_m1", Column(m)); v && m != 1) {
      run.result.summary.AddRow({PassesTimeKey(m),
                                 "x",
                                 absl::StrFormat("prefetch time M=%d / M=1", m),
                                 {{"measured", *v}}});
    }
  }
  run.result.tables.push_back(std::move(table));
}

}  // namespace ember::bench::cache_bench
