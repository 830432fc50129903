// The prefetch case (cache_cases.h): missing rows moved into the cache,
// beside the host-to-GPU references of the same run.
//
// Per home (host-mapped, managed): T tables of uniformly drawn rows, a
// cache of --prefetch_load_factor of them, --prefetch_batches distinct
// batches cycled so that a batch comes back long after its rows were
// evicted. After a warm-up that fills the cache, --repeat runs of
// --prefetch_steps training steps (gpu_run.h, StepLoop: a backward dirties
// each batch's rows): each prefetch misses most of its rows, inserts them
// and writes as many evicted rows back home. Then, after a flush, the same
// steps without the backward (inference, evaluation): the cache writes back
// dirty rows only (CacheOptions::write_back = kDirtyRows), so the evicted
// rows, all clean, stay where they are. Last, without evictions: per run the
// cache is Reset (untimed) and one batch is prefetched into the empty
// cache.

#include <cmath>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/error.h"
#include "ops/elementwise.h"
#include "storage/storage.h"
#include "tools/bench/cache/gpu_run.h"
#include "tools/bench/common/table_printer.h"

namespace ember::bench::cache_bench {
namespace {

constexpr char kReference[] = "reference";
constexpr engine::Context kGpu = engine::Context::GPU(0);

void RunHome(GpuRun& run, const std::string& home, const std::string& column,
             const std::vector<BatchTensors>& batches, Table* table) {
  const CacheBenchOptions& o = run.o;
  const CacheShape& s = o.prefetch_shape;
  cache::CacheOptions options;
  options.ctx = kGpu;
  options.load_factor = o.prefetch_load_factor;
  options.home = home == "managed" ? cache::HomeMemory::kManaged : cache::HomeMemory::kMapped;
  if (home == "mapped-copy") options.mapped_fills = cache::MappedFills::kCopyEngine;
  options.staging_bytes = o.staging_bytes;
  options.write_back = cache::WriteBack::kDirtyRows;  // training's rows are all dirty anyway
  if (home == "managed") {
    const double free = double(storage::DeviceFreeBytes(0));
    if (s.table_bytes() > free / 2) {  // never more managed memory than the GPU has free
      table->notes.push_back(
          absl::StrFormat("%s: not run: the %s table is over half the GPU's "
                          "%s free",
                          column, Gib(s.table_bytes()), Gib(free)));
      return;
    }
  }
  cache::CachedTbe tbe(
      run.engine,
      ops::TbeTables(std::vector<int64_t>(s.tables, s.rows), std::vector<int64_t>(s.tables, s.dim)),
      options);
  ops::RandomUniform(tbe.home(), o.seed + 1);
  cache::CacheLocations locations = tbe.NewLocations(s.indices());
  const storage::Tensor grad = ZeroGrad(run.engine, tbe, s.batch);
  const StepWork train{.grad = &grad};
  const int warm_steps =
      static_cast<int>(2 * std::ceil(double(tbe.num_slots()) / double(s.indices()))) + o.warmup;
  (void)StepLoop(tbe, batches, 0, warm_steps, locations, train);

  Results& samples = run.result.samples;
  const double best = run.h2d.best();
  for (int r = 0; r < o.repeat; ++r) {
    const StepTotals t = StepLoop(tbe, batches, warm_steps + r * o.prefetch_steps, o.prefetch_steps,
                                  locations, train);
    const cache::CacheCounts& c = t.counts;
    const double gbs = double(c.bytes_to_cache) / t.prefetch_ms / 1e6;
    samples.Add("prefetch.step_ms", column, t.prefetch_ms / t.steps);
    samples.Add("prefetch.rows", column, double(c.inserted) / t.steps);
    samples.Add("prefetch.rows_per_s", column, double(c.inserted) / t.prefetch_ms * 1e3);
    samples.Add("prefetch.gbs", column, gbs);
    samples.Add("prefetch.writeback_gbs", column, double(c.bytes_to_home) / t.prefetch_ms / 1e6);
    samples.Add("prefetch.hit_rate", column, 100 * c.hit_rate());
    samples.Add("prefetch.conflict_pct", column,
                100 * double(c.unique_conflict_misses) / double(std::max<int64_t>(c.unique, 1)));
    if (best > 0) samples.Add("prefetch.pct_h2d", column, 100 * gbs / best);
    if (run.h2d.rows_gbs > 0)
      samples.Add("prefetch.pct_rows", column, 100 * gbs / run.h2d.rows_gbs);
  }
  absl::FPrintF(stderr, "[%s] prefetch, %s: %.3f ms a step, %s rows, %.1f GB/s into the cache\n",
                kWho, column, *samples.Get("prefetch.step_ms", column),
                WithCommas(*samples.Get("prefetch.rows", column)),
                *samples.Get("prefetch.gbs", column));

  tbe.Flush();  // every row clean
  int64_t writebacks = 0;
  for (int r = 0; r < o.repeat; ++r) {
    const StepTotals t = StepLoop(tbe, batches, (warm_steps + r) * o.prefetch_steps,
                                  o.prefetch_steps, locations, {});
    writebacks += t.counts.bytes_to_home;
    const double gbs = double(t.counts.bytes_to_cache) / t.prefetch_ms / 1e6;
    samples.Add("prefetch.clean_step_ms", column, t.prefetch_ms / t.steps);
    samples.Add("prefetch.clean_rows", column, double(t.counts.evicted) / t.steps);
    samples.Add("prefetch.clean_gbs", column, gbs);
    if (best > 0) samples.Add("prefetch.clean_pct_h2d", column, 100 * gbs / best);
  }

  for (int r = 0; r < o.warmup + o.repeat; ++r) {
    tbe.Reset();
    const StepTotals t = StepLoop(tbe, batches, r, 1, locations, {});
    writebacks += t.counts.bytes_to_home;
    if (r < o.warmup) continue;
    const double gbs = double(t.counts.bytes_to_cache) / t.prefetch_ms / 1e6;
    samples.Add("prefetch.fill_gbs", column, gbs);
    samples.Add("prefetch.fill_rows", column, double(t.counts.inserted));
    if (best > 0) samples.Add("prefetch.fill_pct_h2d", column, 100 * gbs / best);
  }
  if (writebacks != 0) {
    run.result.failed = true;
    table->notes.push_back(absl::StrFormat(
        "%s: WRONG: prefetches of clean rows or into an emptied cache wrote %d bytes back", column,
        writebacks));
  }
  table->notes.push_back(absl::StrFormat(
      "%s: %s slots (%s), %d warm-up steps", column, WithCommas(double(tbe.num_slots())),
      Gib(double(tbe.num_slots()) * double(tbe.slot_dim()) * 4), warm_steps));
}

}  // namespace

void RunPrefetchCase(GpuRun& run) {
  const CacheBenchOptions& o = run.o;
  const CacheShape& s = o.prefetch_shape;
  Table table;
  table.title = absl::StrFormat("Prefetch of missing rows: %s (%s lookups a batch, %s of rows)",
                                s.Name(), WithCommas(double(s.indices())), Gib(s.table_bytes()));
  for (const std::string& home : o.prefetch_homes) table.columns.push_back(home + " home");
  table.columns.push_back(kReference);

  const ZipfRows zipf(s.rows, s.zipf);
  std::vector<BatchTensors> batches;
  batches.reserve(static_cast<std::size_t>(o.prefetch_batches));
  for (int k = 0; k < o.prefetch_batches; ++k) {
    batches.push_back(Upload(run.engine, MakeBatch(s, zipf, o.seed, k), kGpu));
  }
  for (const std::string& home : o.prefetch_homes) {
    const std::string column = home + " home";
    try {
      RunHome(run, home, column, batches, &table);
    } catch (const Unavailable& e) {
      table.notes.push_back(absl::StrCat(column, ": not run: ", e.what()));
    } catch (const std::exception& e) {  // the references still print
      run.result.failed = true;
      table.notes.push_back(absl::StrCat(column, ": FAILED: ", e.what()));
      try {
        run.engine.WaitForAll();
      } catch (const std::exception&) {  // the same error
      }
    }
  }

  const Results& samples = run.result.samples;
  const std::string rows = absl::StrFormat("%d B", s.dim * 4);
  table.AddRow(samples, "h2d.memcpy_gbs", "GB/s", "H2D cudaMemcpyAsync, pinned");
  table.AddRow(samples, "h2d.zero_copy_gbs", "GB/s", "H2D zero-copy kernel, sequential");
  table.AddRow(samples, "h2d.rows_gbs", "GB/s", "H2D zero-copy kernel, random " + rows + " rows");
  table.AddRow(samples, "h2d.managed_rows_gbs", "GB/s",
               "  the same of managed memory (on the CPU)");
  table.AddRow(samples, "prefetch.step_ms", "ms", "prefetch step, training (dirty rows)");
  table.AddRow(samples, "prefetch.rows", "count", "  rows moved into the cache");
  table.AddRow(samples, "prefetch.rows_per_s", "rows/s", "  rows per second");
  table.AddRow(samples, "prefetch.gbs", "GB/s", "  into the cache");
  table.AddRow(samples, "prefetch.writeback_gbs", "GB/s", "  written back home (evictions)");
  table.AddRow(samples, "prefetch.hit_rate", "%", "  hit rate (distinct rows)");
  table.AddRow(samples, "prefetch.conflict_pct", "%", "  conflict misses (no free way)");
  table.AddRow(samples, "prefetch.pct_h2d", "%", "  % of H2D (better of the first two)");
  table.AddRow(samples, "prefetch.pct_rows", "%", "  % of zero-copy random rows");
  table.AddRow(samples, "prefetch.clean_step_ms", "ms", "prefetch step, inference (clean rows)");
  table.AddRow(samples, "prefetch.clean_rows", "count", "  rows evicted, none written back");
  table.AddRow(samples, "prefetch.clean_gbs", "GB/s", "  into the cache");
  table.AddRow(samples, "prefetch.clean_pct_h2d", "%", "  % of H2D (better of the first two)");
  table.AddRow(samples, "prefetch.fill_gbs", "GB/s", "prefetch into an empty cache");
  table.AddRow(samples, "prefetch.fill_rows", "count", "  rows moved into the cache");
  table.AddRow(samples, "prefetch.fill_pct_h2d", "%", "  % of H2D (better of the first two)");
  table.notes.push_back(absl::StrFormat(
      "%d distinct batches cycled; steady state: --repeat runs of %d steps, a step = prefetch "
      "(timed: push, then wait for its locations) + relookup and, in training, an SGD backward "
      "(untimed); GB/s = row bytes the statistics count / prefetch time; the cache writes back "
      "dirty rows only (CacheOptions::write_back)",
      o.prefetch_batches, o.prefetch_steps));
  table.notes.push_back(absl::StrFormat(
      "H2D references: %s, CUDA events on the bench's stream; the prefetch target divides by the "
      "better of cudaMemcpyAsync and the sequential zero-copy kernel",
      Gib(double(o.h2d_bytes))));
  if (auto pct = table.Value("prefetch.pct_h2d", "mapped home")) {
    run.result.summary.AddRow(
        {kPrefetchPctH2d, "%", "prefetch of misses, % of H2D (mapped)", {{"measured", *pct}}});
  }
  if (auto pct = table.Value("prefetch.clean_pct_h2d", "mapped home")) {
    run.result.summary.AddRow({kPrefetchCleanPctH2d,
                               "%",
                               "  the same, clean evictions (inference)",
                               {{"measured", *pct}}});
  }
  table.DropEmptyColumns();
  run.result.tables.push_back(std::move(table));
}

}  // namespace ember::bench::cache_bench
