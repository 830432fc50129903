// The hit-rate case (cache_cases.h): the set-associative cache against an
// exact LRU of the same capacity (lru_sim.h) and Belady's optimum
// (belady_sim.h), on the same Zipf traces.
//
// Per shape (alpha x table size): one table of ratio x --hit_cache_rows
// rows, a cache of --hit_cache_rows slots (load factor just under
// cache / table, so exactly that many), batches of --hit_batch_indices
// lookups drawn from Zipf(alpha) over the table (one bag a lookup). Each
// batch is prefetched and relooked up at once (the baseline order), so no
// lock of an earlier batch is held at a prefetch, as in the simulators.
// The cache's statistics over the batches after --hit_warmup are what it
// counts; the simulators run the whole trace and count the same batches.
// On the CPU context this is the CPU cache, whose kernels the GPU's match
// bit for bit (cache/internal/cache_args.h); the code is the same on both.

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cache/cached_tbe.h"
#include "ops/elementwise.h"
#include "tools/bench/cache/belady_sim.h"
#include "tools/bench/cache/cache_cases.h"
#include "tools/bench/cache/lru_sim.h"
#include "tools/bench/cache/tbe_batches.h"
#include "tools/bench/cache/zipf_trace.h"
#include "tools/bench/common/table_printer.h"

namespace ember::bench {
namespace cache_bench {
namespace {

constexpr char kWho[] = "ember-bench-cache";
constexpr char kCache[] = "cache";
constexpr char kLru[] = "exact LRU";
constexpr char kBelady[] = "Belady";
constexpr char kGap[] = "cache - LRU";
constexpr double kEligible = 1.5;  // cache rows / distinct rows a batch, for the target

struct ShapeHits {
  int64_t slots = 0;
  double distinct_per_batch = 0;  // U, averaged over the measured batches
  SimCounts cache, lru, belady;
  int64_t conflict_misses = 0;
  bool counts_agree = true;  // the cache counted the distinct rows the trace has
};

ShapeHits RunShape(const CacheBenchOptions& o, engine::Engine& engine, engine::Context ctx,
                   double alpha, int ratio) {
  const int64_t rows = o.hit_cache_rows * ratio;
  cache::CacheOptions options;
  options.ctx = ctx;
  options.home = ctx.is_gpu() ? cache::HomeMemory::kMapped : cache::HomeMemory::kAuto;
  // ceil((cache rows - 0.5) / 32) sets: exactly cache rows / 32 of them.
  options.load_factor = (double(o.hit_cache_rows) - 0.5) / double(rows);
  cache::CachedTbe tbe(engine, ops::TbeTables({rows}, {o.hit_dim}), options);
  ops::Fill(tbe.home(), 0.0f);
  ShapeHits hits;
  hits.slots = tbe.num_slots();

  const CacheShape shape{1, rows, o.hit_dim, 1, o.hit_batch_indices, alpha};
  const ZipfRows zipf(rows, alpha);
  const int total = o.hit_warmup + o.hit_batches;
  Trace trace;
  cache::CacheLocations locations = tbe.NewLocations(o.hit_batch_indices);
  cache::CacheCounts before;
  for (int b = 0; b < total; ++b) {
    const HostBatch batch = MakeBatch(shape, zipf, o.seed, static_cast<uint64_t>(b));
    trace.push_back(LinearRows(batch, rows));
    const BatchTensors tensors = Upload(engine, batch, ctx);
    tbe.Prefetch(tensors.view(), locations);
    tbe.Relookup(tensors.view(), locations);
    if (b + 1 == o.hit_warmup) before = tbe.TotalStats().all;
  }
  const cache::CacheCounts after = tbe.TotalStats().all;
  hits.cache = {after.unique - before.unique, after.unique_misses - before.unique_misses};
  hits.conflict_misses = after.unique_conflict_misses - before.unique_conflict_misses;

  const std::vector<SimCounts> lru = SimulateLru(trace, hits.slots);
  const std::vector<SimCounts> belady = SimulateBelady(trace, hits.slots);
  for (int b = o.hit_warmup; b < total; ++b) {
    hits.lru += lru[b];
    hits.belady += belady[b];
  }
  hits.distinct_per_batch = double(hits.lru.unique) / o.hit_batches;
  hits.counts_agree = hits.cache.unique == hits.lru.unique;
  return hits;
}

std::string Label(double alpha, int ratio, double cache_over_u) {
  return absl::StrFormat("a=%.1f, table %dx, cache %.2fx U", alpha, ratio, cache_over_u);
}

}  // namespace
}  // namespace cache_bench

void RunHitRateCase(const CacheBenchOptions& o, engine::Engine& engine, engine::Context ctx,
                    CacheCasesResult* result) {
  using namespace cache_bench;  // NOLINT: this folder's helpers
  Table table;
  table.title = absl::StrFormat(
      "Hit rate on Zipf traces, %s cache of %s rows (32-way sets, LRU): %s lookups a batch, %d "
      "batches after %d of warm-up",
      ctx.is_gpu() ? "GPU" : "CPU", WithCommas(double(o.hit_cache_rows)),
      WithCommas(double(o.hit_batch_indices)), o.hit_batches, o.hit_warmup);
  table.columns = {kCache, kLru, kBelady, kGap};
  std::optional<double> worst;
  std::string worst_shape;
  int eligible = 0;
  int within = 0;
  double worst_conflicts = 0;
  for (double alpha : o.hit_alphas) {
    for (int ratio : o.hit_table_ratios) {
      const ShapeHits h = RunShape(o, engine, ctx, alpha, ratio);
      const double cache_over_u = double(h.slots) / h.distinct_per_batch;
      const double gap = 100 * (h.cache.hit_rate() - h.lru.hit_rate());
      const std::string key = absl::StrFormat("hit.a%g.x%d", alpha, ratio);
      const std::map<std::string, double> values = {{kCache, 100 * h.cache.hit_rate()},
                                                    {kLru, 100 * h.lru.hit_rate()},
                                                    {kBelady, 100 * h.belady.hit_rate()},
                                                    {kGap, gap}};
      for (const auto& [column, value] : values) result->samples.Add(key, column, value);
      result->samples.Add(key, "cache_over_u", cache_over_u);
      table.AddRow({key, "%", Label(alpha, ratio, cache_over_u), values});
      worst_conflicts = std::max(worst_conflicts, 100 * double(h.conflict_misses) /
                                                      double(std::max<int64_t>(h.cache.unique, 1)));
      if (cache_over_u >= kEligible) {
        ++eligible;
        within += gap >= -2.0 ? 1 : 0;
        if (!worst || gap < *worst) {
          worst = gap;
          worst_shape = Label(alpha, ratio, cache_over_u);
        }
      }
      if (!h.counts_agree) {
        result->failed = true;
        table.notes.push_back(
            absl::StrFormat("WRONG: %s: the cache counted %d distinct rows, the trace has %d",
                            Label(alpha, ratio, cache_over_u), h.cache.unique, h.lru.unique));
      }
      absl::FPrintF(stderr,
                    "[%s] hit rate a=%.1f %dx (U %.0f, cache %.2fx U): cache %.2f%%, LRU %.2f%%, "
                    "Belady %.2f%%\n",
                    kWho, alpha, ratio, h.distinct_per_batch, cache_over_u,
                    100 * h.cache.hit_rate(), 100 * h.lru.hit_rate(), 100 * h.belady.hit_rate());
    }
  }
  table.notes.push_back(
      "hit rate of distinct rows: 1 - misses / distinct rows, summed over the measured batches; "
      "U: distinct rows a batch; cache - LRU in points");
  table.notes.push_back(absl::StrFormat(
      "exact LRU: fully associative, same capacity, batch granularity; Belady: MIN at batch "
      "granularity, the ceiling; both on the same traces (tools/bench/cache/*_sim.h)"));
  table.notes.push_back(absl::StrFormat(
      "target (cache >= %.1fx U): %d of %d shapes within 2 points of exact LRU%s; below %.1fx U "
      "the gap and the ceiling are reported only",
      kEligible, within, eligible,
      worst ? absl::StrFormat(", worst %+.2f at %s", *worst, worst_shape) : std::string(),
      kEligible));
  table.notes.push_back(absl::StrFormat(
      "conflict misses (a miss whose set had no free way): at most %.2f%% of distinct rows",
      worst_conflicts));
  if (worst) {
    result->summary.AddRow(
        {kHitGapWorst, "%", "hit rate - exact LRU, worst (>= 1.5x U)", {{"measured", *worst}}});
  }
  result->tables.push_back(std::move(table));
}

}  // namespace ember::bench
