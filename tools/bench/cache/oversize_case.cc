// The oversize case (cache_cases.h): tables larger than the GPU's memory,
// their home in host-mapped pinned memory (CacheOptions::home = kMapped),
// a cache of --oversize_cache_gib in GPU memory. The tables are
// --oversize_gb if host memory allows (MemAvailable, or a container's
// cgroup limit less its usage, less --oversize_reserve_gib), else as large
// as it does; the notes say which, and whether they exceed the GPU's
// memory. Their rows are left as allocated (zeros): the figures do not
// depend on the values. Every step takes a fresh Zipf batch (cycling a few
// would let a cache this large hold them all): a warm-up until the cache
// has been filled, then --repeat runs of --oversize_steps steps (gpu_run.h,
// StepLoop): training steps (the cached forward, and a backward that
// dirties the batch's rows) when the forward runs, prefetches alone else.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/error.h"
#include "storage/memory.h"
#include "tools/bench/cache/gpu_run.h"
#include "tools/bench/common/table_printer.h"

namespace ember::bench::cache_bench {
namespace {

constexpr engine::Context kGpu = engine::Context::GPU(0);
constexpr char kColumn[] = "cache";
constexpr int kMaxWarmSteps = 200;

// A number from the first line of `path` ("max" or unreadable: none).
std::optional<double> ReadNumber(const char* path) {
  std::ifstream file(path);
  double value = 0;
  if (file >> value) return value;
  return std::nullopt;
}

// The value of `key` in a "key value" file (a cgroup's memory.stat); 0 if
// absent.
double StatValue(const char* path, const std::string& key) {
  std::ifstream file(path);
  std::string name;
  double value = 0;
  while (file >> name >> value) {
    if (name == key) return value;
  }
  return 0;
}

// Host memory this process may still take, in bytes: /proc/meminfo's
// MemAvailable, or less when a cgroup's limit (a container's) leaves less
// room than that beside its usage (less its inactive page cache, which the
// kernel reclaims). Pinned memory counts against both. 0 if unknown.
double HostMemAvailable() {
  std::ifstream meminfo("/proc/meminfo");
  double available = 0;
  for (std::string line; std::getline(meminfo, line);) {
    double kib = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %lf kB", &kib) == 1) {
      available = kib * 1024;
      break;
    }
  }
  struct Cgroup {
    const char* limit;
    const char* usage;
    const char* stat;
    const char* inactive_file;
  };
  const Cgroup cgroups[] = {
      {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current", "/sys/fs/cgroup/memory.stat",
       "inactive_file"},  // v2
      {"/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes",
       "/sys/fs/cgroup/memory/memory.stat", "total_inactive_file"}};  // v1
  for (const Cgroup& cgroup : cgroups) {
    const std::optional<double> limit = ReadNumber(cgroup.limit);
    const std::optional<double> usage = ReadNumber(cgroup.usage);
    if (!limit || !usage) continue;
    const double used = *usage - StatValue(cgroup.stat, cgroup.inactive_file);
    available = std::min(available, *limit - used);
  }
  return std::max(available, 0.0);
}

}  // namespace

void RunOversizeCase(GpuRun& run) {
  const CacheBenchOptions& o = run.o;
  CacheShape s = o.oversize_shape;
  const double available = HostMemAvailable();
  const double allowed = available - o.oversize_reserve_gib * double(1 << 30);
  const double wanted = o.oversize_gb * 1e9;
  const double size = std::min(wanted, allowed);
  const double row_bytes = double(s.dim) * 4;
  s.rows = static_cast<int64_t>(
      std::min(size / (row_bytes * s.tables), double(std::numeric_limits<int32_t>::max())));
  if (size < double(1 << 30) || s.rows < 1) {
    throw Unavailable(absl::StrFormat(
        "[oversize] host memory: %s available, %s kept for the rest: no room for a table",
        Gib(available), Gib(o.oversize_reserve_gib * double(1 << 30))));
  }
  const double table_bytes = s.table_bytes();
  absl::FPrintF(stderr, "[%s] oversize: %s of host-mapped tables (%s available), allocating...\n",
                kWho, Gib(table_bytes), Gib(available));

  cache::CacheOptions options;
  options.ctx = kGpu;
  options.home = cache::HomeMemory::kMapped;
  options.staging_bytes = o.staging_bytes;
  options.cache_bytes = static_cast<int64_t>(o.oversize_cache_gib * double(1 << 30));
  auto start = Clock::now();
  std::unique_ptr<cache::CachedTbe> cached;
  try {
    cached =
        std::make_unique<cache::CachedTbe>(run.engine,
                                           ops::TbeTables(std::vector<int64_t>(s.tables, s.rows),
                                                          std::vector<int64_t>(s.tables, s.dim)),
                                           options);
  } catch (const storage::OutOfMemory& e) {  // the machine's limit, not the cache's
    throw Unavailable(absl::StrCat("[oversize] ", Gib(table_bytes),
                                   " of host-mapped memory could not be had (try a smaller "
                                   "--oversize_gb): ",
                                   e.what()));
  }
  cache::CachedTbe& tbe = *cached;
  tbe.home().WaitToRead();
  const double alloc_s = MillisSince(start) / 1e3;

  start = Clock::now();
  const ZipfRows zipf(s.rows, s.zipf);
  auto fresh = [&, number = uint64_t{2000}]() mutable {
    return Upload(run.engine, MakeBatch(s, zipf, o.seed, number++), kGpu);
  };
  // The timed steps' batches, made before any timing.
  std::vector<BatchTensors> batches;
  for (int k = 0; k < o.repeat * o.oversize_steps; ++k) batches.push_back(fresh());
  const double batches_s = MillisSince(start) / 1e3;
  cache::CacheLocations locations = tbe.NewLocations(s.indices());
  storage::Tensor out = storage::Tensor::Empty(run.engine, {s.batch, int64_t{s.tables} * s.dim},
                                               storage::DType::kF32, kGpu);
  tbe.Prefetch(batches[0].view(), locations);
  const ForwardCheck forward = CheckCachedForward(tbe, batches[0].view(), locations, out);
  run.result.failed |= forward.failed;
  tbe.Relookup(batches[0].view(), locations);
  // Training steps (a backward dirties each batch's rows) where the cached
  // forward runs; prefetches alone otherwise.
  const storage::Tensor grad = ZeroGrad(run.engine, tbe, s.batch);
  const StepWork work = forward.ok() ? StepWork{&out, &grad} : StepWork{};

  // Warm-up on batches of its own until as many rows were inserted as the
  // cache has slots (it is full, and has started to evict), then --warmup
  // steps more.
  int warm_steps = 0;
  int64_t inserted = 0;
  for (int extra = 0; extra <= o.warmup && warm_steps < kMaxWarmSteps; ++warm_steps) {
    std::vector<BatchTensors> one;
    one.push_back(fresh());
    inserted += StepLoop(tbe, one, 0, 1, locations, work).counts.inserted;
    if (inserted >= tbe.num_slots()) ++extra;
  }
  Results& samples = run.result.samples;
  const double best = run.h2d.best();
  for (int r = 0; r < o.repeat; ++r) {
    const StepTotals t =
        StepLoop(tbe, batches, r * o.oversize_steps, o.oversize_steps, locations, work);
    const cache::CacheCounts& c = t.counts;
    const double gbs = double(c.bytes_to_cache) / t.prefetch_ms / 1e6;
    samples.Add("oversize.step_ms", kColumn, t.prefetch_ms / t.steps);
    samples.Add("oversize.rows", kColumn, double(c.inserted) / t.steps);
    samples.Add("oversize.distinct", kColumn, double(c.unique) / t.steps);
    samples.Add("oversize.hit_rate", kColumn, 100 * c.hit_rate());
    samples.Add("oversize.gbs", kColumn, gbs);
    if (best > 0) samples.Add("oversize.pct_h2d", kColumn, 100 * gbs / best);
    if (work.out != nullptr) {
      samples.Add("oversize.forward_ms", kColumn, t.forward_ms / t.steps);
      samples.Add("oversize.step_total_ms", kColumn, (t.prefetch_ms + t.forward_ms) / t.steps);
    }
  }
  absl::FPrintF(stderr, "[%s] oversize: %.3f ms a prefetch, hit rate %.1f%%, %.1f GB/s\n", kWho,
                *samples.Get("oversize.step_ms", kColumn),
                *samples.Get("oversize.hit_rate", kColumn), *samples.Get("oversize.gbs", kColumn));

  Table table;
  table.title = absl::StrFormat("Tables larger than the GPU: %s, %s host-mapped, cache %s",
                                s.Name(), Gib(table_bytes), Gib(o.oversize_cache_gib * (1 << 30)));
  table.columns = {kColumn};
  table.AddRow(
      {"oversize.table_gb", "GB", "tables (home, host-mapped)", {{kColumn, table_bytes / 1e9}}});
  table.AddRow({"oversize.gpu_gb", "GB", "GPU memory", {{kColumn, run.gpu_total_bytes / 1e9}}});
  table.AddRow(samples, "oversize.step_ms", "ms", "prefetch, steady state");
  table.AddRow(samples, "oversize.distinct", "count", "  distinct rows a batch");
  table.AddRow(samples, "oversize.hit_rate", "%", "  hit rate (distinct rows)");
  table.AddRow(samples, "oversize.rows", "count", "  rows moved into the cache");
  table.AddRow(samples, "oversize.gbs", "GB/s", "  into the cache");
  table.AddRow(samples, "oversize.pct_h2d", "%", "  % of H2D (better of the two)");
  table.AddRow(samples, "oversize.forward_ms", "ms", "cached forward (misses read home)");
  table.AddRow(samples, "oversize.step_total_ms", "ms", "prefetch + forward, a step");
  table.notes.push_back(absl::StrFormat(
      "size: --oversize_gb=%g asked, host memory available %s less %g GiB kept: %s; the tables are "
      "%s the GPU's %s",
      o.oversize_gb, Gib(available), o.oversize_reserve_gib,
      size < wanted ? "capped by host memory" : "as asked",
      table_bytes > run.gpu_total_bytes ? "larger than" : "NOT larger than (path only)",
      Gib(run.gpu_total_bytes)));
  table.notes.push_back(absl::StrFormat(
      "home allocated (pinned, mapped) in %.1f s; %d batches made on the host in %.1f s; %s slots; "
      "%d warm-up steps, a step = prefetch (timed), forward (timed), relookup and an SGD "
      "backward (untimed)",
      alloc_s, o.repeat * o.oversize_steps, batches_s, WithCommas(double(tbe.num_slots())),
      warm_steps));
  if (!forward.ok()) table.notes.push_back(forward.Note());
  run.result.tables.push_back(std::move(table));
}

}  // namespace ember::bench::cache_bench
