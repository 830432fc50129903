#pragma once

// The cases of ember-bench-cache: the embedding cache (cache/cached_tbe.h)
// against what bounds it, each beside its reference in one run.
//
//   prefetch   prefetch of missing rows, rows/s and GB/s into the cache,
//              beside the host-to-GPU bandwidth of the same run (a
//              cudaMemcpyAsync of pinned memory; zero-copy kernels reading
//              host-mapped memory, in sequence and as random rows)
//   all_hit    at one TBE shape with every row cached (CachedTbe::Warm):
//              the prefetch beside the cached forward, and the cached
//              forward beside ops' TBE forward on weights in GPU memory
//   passes     peak prefetch temporaries per index, and the prefetch's
//              time, at 1, 4 and 12 passes
//   hit_rate   hit rate on Zipf traces against an exact LRU of the same
//              capacity and Belady's optimum (lru_sim.h, belady_sim.h),
//              on the GPU cache or, with --device=cpu, the CPU cache
//   oversize   a table in host-mapped memory larger than the GPU's memory
//              (as large as host memory allows)
//
// Timing (docs/benchmarks.md, "Cache"): the cache's ops and ops' forward
// by the host clock around engine pushes and a WaitForVar on what they
// write; the references by CUDA events on a stream of the bench's own. A
// warm-up first; the median of --repeat runs.
//
// A build without CUDA links gpu_cases_stub.cc: the GPU cases say why they
// did not run, and the hit-rate case runs on the CPU cache.
//
// Thread safety: the bench's main thread only.

#include <cstdint>
#include <string>
#include <vector>

#include "cache/cache_options.h"
#include "engine/engine.h"
#include "tools/bench/common/results.h"
#include "tools/bench/common/table.h"

namespace ember::bench {

// A TBE shape: T tables of `rows` rows of `dim` f32, B bags of L lookups
// per table, Zipf(alpha) over each table's rows (alpha 0: uniform).
struct CacheShape {
  int tables = 8;
  int64_t rows = 1'000'000;  // per table
  int dim = 128;
  int pooling = 20;       // L
  int64_t batch = 16384;  // B
  double zipf = 1.05;

  [[nodiscard]] int64_t indices() const { return int64_t{tables} * pooling * batch; }
  [[nodiscard]] double table_bytes() const { return double(tables) * double(rows) * dim * 4; }
  // "T=8 L=20 B=16384, 1,000,000 rows x 128 f32 per table, Zipf 1.05".
  [[nodiscard]] std::string Name() const;
};

struct CacheBenchOptions {
  bool on_gpu = true;  // --device=gpu; false: the hit-rate case on the CPU cache, nothing else
  // Which cases run (the names above).
  bool prefetch = true, all_hit = true, passes = true, hit_rate = true, oversize = true;
  std::string engine = "ThreadedEnginePerDeviceAsync";
  uint64_t seed = 1;
  int repeat = 5;  // timed runs per figure; the median is reported
  int warmup = 2;  // untimed runs (or steps) first

  // References and the prefetch case.
  int64_t h2d_bytes = int64_t{1} << 30;
  CacheShape prefetch_shape{8, 524'288, 128, 1, 32'768, 0.0};  // 262,144 uniform lookups
  double prefetch_load_factor = 0.1;
  int prefetch_batches = 16;  // distinct batches, cycled
  int prefetch_steps = 16;    // per run
  std::vector<std::string> prefetch_homes = {"mapped", "managed"};
  // CacheOptions::staging_bytes of every cache with a mapped home.
  int64_t staging_bytes = cache::CacheOptions{}.staging_bytes;

  // The all-hit and passes cases.
  CacheShape shape;
  double all_hit_slack = 2.5;  // cache slots per distinct row of the batch
  int all_hit_iters = 16;      // ops per timed run
  std::vector<int> passes_list = {1, 4, 12};
  double passes_load_factor = 0.2;
  int passes_batches = 8;
  int passes_steps = 8;

  // The hit-rate case.
  std::vector<double> hit_alphas = {0.8, 1.0, 1.2};
  std::vector<int> hit_table_ratios = {10, 30, 100};  // table rows / cache rows
  int64_t hit_cache_rows = 32'768;
  int64_t hit_batch_indices = 32'768;
  int hit_batches = 200;  // measured, after the warm-up batches
  int hit_warmup = 50;
  int hit_dim = 8;  // the hit rate does not depend on it

  // The oversize case.
  double oversize_gb = 90;           // the table's size, 1e9 bytes, if host memory allows
  double oversize_reserve_gib = 16;  // host memory left to everything else
  double oversize_cache_gib = 8;
  CacheShape oversize_shape;  // rows computed from the size
  int oversize_steps = 8;
};

// Keys of the summary's rows (the targets check them).
inline constexpr char kPrefetchPctH2d[] = "prefetch_pct_of_h2d";
inline constexpr char kPrefetchCleanPctH2d[] = "prefetch_clean_pct_of_h2d";
inline constexpr char kAllHitPrefetchOverForward[] = "all_hit_prefetch_over_forward";
inline constexpr char kCachedForwardPct[] = "cached_forward_pct_of_gpu_tbe";
inline constexpr char kHitGapWorst[] = "hit_rate_minus_lru_worst";
// "temp_per_index_M<m>", "time_M<m>_over_M1".
[[nodiscard]] std::string TempPerIndexKey(int passes);
[[nodiscard]] std::string PassesTimeKey(int passes);

struct CacheCasesResult {
  std::vector<Table> tables;  // one per case run, in case order
  Table summary;              // the targets' rows and the targets
  Results samples;            // every run's figure
  std::string device;         // the GPU's line, or empty
  bool ran = false;           // some case measured something
  bool failed = false;        // a check failed: a forward or a count disagreed
};

// The summary table with every target declared (rows come from the cases).
[[nodiscard]] Table SummaryTable(const CacheBenchOptions& options);

// The GPU cases (prefetch, all_hit, passes, oversize, and hit_rate on the
// GPU) on GPU 0, each adding its table (or a note saying why it did not
// run) and its summary rows. Returns false without running anything when
// there is no GPU or no CUDA build, with the reason in `why`. Progress on
// stderr. Throws CudaError for a failed CUDA call of the bench's own.
bool RunGpuCases(const CacheBenchOptions& options, engine::Engine& engine, CacheCasesResult* result,
                 std::string* why);

// The hit-rate case on `ctx` (the CPU or GPU 0).
void RunHitRateCase(const CacheBenchOptions& options, engine::Engine& engine, engine::Context ctx,
                    CacheCasesResult* result);

}  // namespace ember::bench
