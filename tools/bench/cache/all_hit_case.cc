// The all-hit case (cache_cases.h): one TBE batch whose every row is cached
// (CachedTbe::Warm with the batch's distinct rows, in a cache of
// --all_hit_slack slots per row), so that neither the prefetch nor the
// forward moves a row. Per run, in turn (--repeat runs after --warmup):
//
//   prefetch            --all_hit_iters prefetches of the batch back to
//                       back, each into locations of its own (all in
//                       flight at once: a hit only locks its slot again),
//                       timed until the last one's locations are written;
//                       their relookups follow untimed
//   prefetch+relookup   the same number of (prefetch, relookup) pairs
//   cached forward      the batch prefetched (untimed), then
//                       --all_hit_iters forwards, timed until `out` is
//                       written
//   GPU TBE forward     ops::EmbeddingBagForward on the same rows in GPU
//                       memory (weights and home hold the same seeded
//                       values), the same way
//
// Then the two forwards' outputs are compared on the host.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ops/elementwise.h"
#include "tools/bench/cache/gpu_run.h"
#include "tools/bench/common/table_printer.h"

namespace ember::bench::cache_bench {
namespace {

constexpr engine::Context kGpu = engine::Context::GPU(0);
constexpr char kCached[] = "cached";
constexpr char kGpuTbe[] = "GPU TBE";

// Wall ms per op of `iters` pushes of `push`, until `written` is.
template <typename Push>
double TimeOps(int iters, const storage::Tensor& written, Push push) {
  const auto start = Clock::now();
  for (int i = 0; i < iters; ++i) push(i);
  written.WaitToRead();
  return MillisSince(start) / iters;
}

// The largest difference between two [B, T*D] outputs, relative to the
// reference's magnitude; on the host.
double MaxRelativeDifference(engine::Engine& engine, const storage::Tensor& a,
                             const storage::Tensor& b) {
  auto host = [&](const storage::Tensor& t) {
    storage::Tensor copy =
        storage::Tensor::Empty(engine, t.shape(), storage::DType::kF32, engine::Context::CPU());
    t.CopyTo(copy);
    copy.WaitToRead();
    return copy;
  };
  const storage::Tensor ha = host(a);
  const storage::Tensor hb = host(b);
  const float* x = ha.data<float>();
  const float* y = hb.data<float>();
  double worst = 0;
  for (int64_t i = 0; i < ha.numel(); ++i) {
    worst = std::max(worst, std::fabs(double(x[i]) - y[i]) / (1e-6 + std::fabs(double(y[i]))));
  }
  return worst;
}

}  // namespace

void RunAllHitCase(GpuRun& run) {
  const CacheBenchOptions& o = run.o;
  const CacheShape& s = o.shape;
  engine::Engine& engine = run.engine;
  const ops::TbeTables tables(std::vector<int64_t>(s.tables, s.rows),
                              std::vector<int64_t>(s.tables, s.dim));
  const ZipfRows zipf(s.rows, s.zipf);
  const HostBatch host_batch = MakeBatch(s, zipf, o.seed, 0);
  const std::vector<int64_t> rows = LinearRows(host_batch, s.rows);

  cache::CacheOptions options;
  options.ctx = kGpu;
  options.home = cache::HomeMemory::kMapped;
  options.load_factor =
      std::min(1.0, o.all_hit_slack * double(rows.size()) / double(tables.total_rows()));
  cache::CachedTbe tbe(engine, tables, options);
  ops::RandomUniform(tbe.home(), o.seed + 1);
  tbe.Warm(rows);
  storage::Tensor weights =
      storage::Tensor::Empty(engine, {tables.total_elements()}, storage::DType::kF32, kGpu);
  ops::RandomUniform(weights, o.seed + 1);  // the home's values: (seed, i) alone decide them
  const BatchTensors batch_tensors = Upload(engine, host_batch, kGpu);
  const ops::TbeBatch batch = batch_tensors.view();
  const std::vector<int64_t> out_shape = {s.batch, tables.total_dim()};
  storage::Tensor out_cached =
      storage::Tensor::Empty(engine, out_shape, storage::DType::kF32, kGpu);
  storage::Tensor out_gpu = storage::Tensor::Empty(engine, out_shape, storage::DType::kF32, kGpu);
  const int iters = o.all_hit_iters;
  std::vector<cache::CacheLocations> locations;
  for (int i = 0; i < iters; ++i) locations.push_back(tbe.NewLocations(s.indices()));

  tbe.Prefetch(batch, locations[0]);
  const cache::CacheCounts warm = tbe.LastStepStats().all;
  const ForwardCheck forward = CheckCachedForward(tbe, batch, locations[0], out_cached);
  run.result.failed |= forward.failed;
  tbe.Relookup(batch, locations[0]);

  Results& samples = run.result.samples;
  const ops::TbeOptions fast = FastForward();
  for (int r = 0; r < o.warmup + o.repeat; ++r) {
    const bool timed = r >= o.warmup;
    auto add = [&](const char* key, const char* column, double ms) {
      if (timed) samples.Add(key, column, ms);
    };
    add("all_hit.prefetch_ms", kCached, TimeOps(iters, locations[iters - 1].tensor(), [&](int i) {
          tbe.Prefetch(batch, locations[i]);
        }));
    for (int i = 0; i < iters; ++i) tbe.Relookup(batch, locations[i]);
    tbe.state().WaitToRead();  // no untimed op left to overlap the next timing
    add("all_hit.prefetch_relookup_ms", kCached, TimeOps(iters, locations[0].tensor(), [&](int) {
          tbe.Prefetch(batch, locations[0]);
          tbe.Relookup(batch, locations[0]);
        }));
    if (forward.ok()) {
      tbe.Prefetch(batch, locations[0]);
      locations[0].tensor().WaitToRead();
      add("all_hit.forward_ms", kCached, TimeOps(iters, out_cached, [&](int) {
            tbe.Forward(batch, locations[0], out_cached, fast);
          }));
      tbe.Relookup(batch, locations[0]);
      tbe.state().WaitToRead();
    }
    add("all_hit.forward_ms", kGpuTbe, TimeOps(iters, out_gpu, [&](int) {
          ops::EmbeddingBagForward(tables, weights, batch, out_gpu, fast);
        }));
  }
  const auto& prefetch = samples.Samples("all_hit.prefetch_ms", kCached);
  const auto& cached = samples.Samples("all_hit.forward_ms", kCached);
  const auto& gpu = samples.Samples("all_hit.forward_ms", kGpuTbe);
  for (std::size_t r = 0; r < cached.size() && r < gpu.size(); ++r) {
    samples.Add("all_hit.prefetch_over_forward", kCached, prefetch[r] / cached[r]);
    samples.Add("all_hit.forward_pct", kCached, 100 * gpu[r] / cached[r]);
  }

  Table table;
  table.title = absl::StrFormat("All rows cached: %s (%s lookups, %s distinct rows)", s.Name(),
                                WithCommas(double(s.indices())), WithCommas(double(rows.size())));
  table.columns = {kCached, kGpuTbe};
  table.AddRow(
      {"all_hit.hit_rate", "%", "hit rate after Warm", {{kCached, 100 * warm.hit_rate()}}});
  table.AddRow(samples, "all_hit.prefetch_ms", "ms", "prefetch, all hits");
  table.AddRow(samples, "all_hit.prefetch_relookup_ms", "ms", "  prefetch + relookup");
  table.AddRow(samples, "all_hit.forward_ms", "ms", "forward");
  table.AddRow(samples, "all_hit.prefetch_over_forward", "x", "prefetch / cached forward");
  table.AddRow(samples, "all_hit.forward_pct", "%", "cached forward, % of GPU TBE speed");
  table.notes.push_back(absl::StrFormat(
      "cache: %s slots (%.1f per distinct row), home host-mapped; %d ops per timed run, host "
      "clock until the last op's output is written; ratios paired run by run",
      WithCommas(double(tbe.num_slots())), double(tbe.num_slots()) / double(rows.size()), iters));
  if (warm.unique_misses > 0) {
    table.notes.push_back(absl::StrFormat(
        "%d of %d distinct rows missed after Warm (their sets were full): those read home",
        warm.unique_misses, warm.unique));
  }
  if (!forward.ok()) {
    table.notes.push_back(forward.Note());
  } else {
    const double diff = MaxRelativeDifference(engine, out_cached, out_gpu);
    const bool same = diff <= 1e-4;
    table.notes.push_back(absl::StrFormat(
        "cached forward vs GPU TBE forward, every output: largest relative difference %.2g (%s)",
        diff, same ? "match" : "WRONG"));
    run.result.failed |= !same;
  }
  absl::FPrintF(
      stderr, "[%s] all hits: prefetch %.3f ms, cached forward %s, GPU TBE forward %.3f ms\n", kWho,
      *samples.Get("all_hit.prefetch_ms", kCached),
      forward.ok() ? absl::StrFormat("%.3f ms", *samples.Get("all_hit.forward_ms", kCached))
                   : std::string("not run"),
      *samples.Get("all_hit.forward_ms", kGpuTbe));
  for (const auto& [key, summary_key, unit, label] :
       {std::tuple{"all_hit.prefetch_over_forward", kAllHitPrefetchOverForward, "x",
                   "all-hit prefetch / cached forward"},
        std::tuple{"all_hit.forward_pct", kCachedForwardPct, "%",
                   "cached forward, % of GPU TBE speed"}}) {
    if (auto value = table.Value(key, kCached)) {
      run.result.summary.AddRow({summary_key, unit, label, {{"measured", *value}}});
    }
  }
  run.result.tables.push_back(std::move(table));
}

}  // namespace ember::bench::cache_bench
