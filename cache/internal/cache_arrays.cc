#include "cache/internal/cache_arrays.h"

#include <algorithm>
#include <utility>

#include "cache/internal/cache_kernels.h"
#include "cache/internal/cache_push.h"

namespace ember::cache::internal {
namespace {

RowType RowTypeOf(storage::DType dtype) {
  switch (dtype) {
    case storage::DType::kF16:
      return RowType::kF16;
    case storage::DType::kBF16:
      return RowType::kBF16;
    default:
      return RowType::kF32;
  }
}

int64_t StatElements(int num_tables) { return (num_tables + 1) * int64_t{kStatFields}; }
int64_t TallyElements(int num_tables) { return int64_t{kStatTallies} * num_tables * kStatFields; }
// Both statistics and the tallies, which follow them.
int64_t CountElements(int num_tables) {
  return 2 * StatElements(num_tables) + TallyElements(num_tables);
}

}  // namespace

int64_t StateElements(int64_t num_slots, int num_tables) {
  return 2 * num_slots + (num_slots + 1) / 2 + CountElements(num_tables);
}

int64_t TableArrayElements(const ops::TbeTables& tables) {
  return 4 * int64_t{tables.num_tables()} + 2;
}

std::vector<int64_t> TableArrays(const ops::TbeTables& tables) {
  const int t_count = tables.num_tables();
  std::vector<int64_t> values;
  values.reserve(static_cast<std::size_t>(TableArrayElements(tables)));
  for (int t = 0; t < t_count; ++t) values.push_back(tables.rows(t));
  for (int t = 0; t < t_count; ++t) values.push_back(tables.dim(t));
  for (int t = 0; t <= t_count; ++t) {
    values.push_back(t < t_count ? tables.row_offset(t) : tables.total_rows());
  }
  for (int t = 0; t <= t_count; ++t) {
    values.push_back(t < t_count ? tables.weight_offset(t) : tables.total_elements());
  }
  return values;
}

void PointAtTableArrays(const int64_t* base, int num_tables, CacheArgs* args) {
  args->rows = base;
  args->dims = base + num_tables;
  args->row_offsets = base + int64_t{2} * num_tables;
  args->weight_offsets = base + int64_t{3} * num_tables + 1;
}

CacheArgs MakeCacheArgs(const ops::TbeTables& tables, const CacheOptions& options, int64_t num_sets,
                        int64_t slot_dim, const storage::Tensor& home, const storage::Tensor& slots,
                        const storage::Tensor& state, const storage::Tensor& dirty,
                        const storage::Tensor& counts, const storage::Tensor& meta) {
  CacheArgs args;
  args.device = options.ctx.is_gpu() ? options.ctx.device_id : -1;
  const int t_count = tables.num_tables();
  args.num_tables = t_count;
  args.num_sets = num_sets;
  args.slot_dim = slot_dim;
  args.row_type = RowTypeOf(options.dtype);
  args.policy = options.policy == CachePolicy::kLfu ? Policy::kLfu : Policy::kLru;
  args.write_back_every_row = options.write_back == WriteBack::kEveryRow;
  args.link_warps = options.link_warps;
  PointAtTableArrays(meta.data<int64_t>(), t_count, &args);
  args.total_rows = tables.total_rows();
  args.home = home.data();
  args.slots = slots.data();
  const int64_t num_slots = num_sets * kWays;
  int64_t* s = state.data<int64_t>();
  args.tags = s;
  args.timestamps = s + num_slots;
  args.locks = reinterpret_cast<int32_t*>(s + 2 * num_slots);
  args.dirty = dirty.data<int32_t>();
  if (args.device >= 0) args.home_mapped = HomeIsMappedCuda(args.home, args.device);
  int64_t* stats = s + 2 * num_slots + (num_slots + 1) / 2;
  if (options.collect_stats) {
    args.stats_step = stats;
    args.stats_total = stats + StatElements(t_count);
    if (args.device >= 0) args.stat_tallies = stats + 2 * StatElements(t_count);
  }
  args.counts = counts ? counts.data<int64_t>() : nullptr;
  return args;
}

int64_t StagingRows(int64_t staging_bytes, int64_t slot_row_bytes) {
  return staging_bytes / (slot_row_bytes + 24);
}

namespace {

// The i64 elements of the staging's rows (the layout's first part).
int64_t StagingRowElements(int64_t rows, int64_t slot_row_bytes) {
  return (rows * slot_row_bytes + 7) / 8;
}

}  // namespace

int64_t StagingElements(int64_t rows, int64_t slot_row_bytes, int64_t num_slots) {
  return StagingRowElements(rows, slot_row_bytes) + 3 * rows + num_slots;
}

void SetStaging(const storage::Tensor& staging, int64_t rows, int64_t slot_row_bytes,
                CacheArgs* args) {
  int64_t* ids = staging.data<int64_t>() + StagingRowElements(rows, slot_row_bytes);
  auto* at = reinterpret_cast<uint32_t*>(ids + 2 * rows);
  args->staging = staging.data();
  args->staged_rows[0] = ids;
  args->staged_rows[1] = ids + rows;
  args->staged_at[0] = at;
  args->staged_at[1] = at + rows;
  args->staging_capacity = rows;
  args->evicted_of_slot = ids + 3 * rows;
}

PrefetchScratchPlan PlanPrefetchScratch(const CacheArgs& cache, int64_t num_indices, int passes) {
  PrefetchScratchPlan plan;
  const int64_t n = std::max<int64_t>(num_indices, 0);
  plan.chunk = passes <= 1 ? n : (n + passes - 1) / passes;
  const int64_t step = std::max<int64_t>(plan.chunk, 1);
  plan.passes = static_cast<int>((n + step - 1) / step);
  plan.fills = cache.home_mapped ? std::min(n, cache.num_sets * kWays) : 0;
  const int64_t piece = plan.passes > 1 ? std::min(plan.fills, plan.chunk + plan.chunk / 2) : 0;
  plan.sort_entries = std::max(plan.chunk, piece);
  plan.largest_sort = std::max(plan.sort_entries, cache.staging_capacity);
  plan.staged_index = plan.fills > 0 && plan.passes > 1 && cache.staging_capacity > 0;
  return plan;
}

int64_t PrefetchScratchBytes(const CacheArgs& cache, int64_t num_indices, int passes) {
  const PrefetchScratchPlan plan = PlanPrefetchScratch(cache, num_indices, passes);
  // The header, the sort buffers (rows and positions, twice), the sort's
  // tile counts, the deferred fills' slots and the staged rows' index.
  return kPrefetchHeaderBytes + 24 * plan.sort_entries + MissTileCountBytes(plan.largest_sort) +
         4 * plan.fills + (plan.staged_index ? 4 * kHomeKeys : 0);
}

LocationArgs LocationsIn(const storage::Tensor& locations, int64_t capacity) {
  int32_t* base = locations.data<int32_t>();
  return LocationArgs{base, base + capacity, reinterpret_cast<int64_t*>(base + 2 * capacity)};
}

void PushInitialize(engine::Engine& engine, const ops::TbeTables& tables,
                    std::shared_ptr<const CacheArgs> args, const storage::Tensor& meta,
                    const storage::Tensor& state, const storage::Tensor& dirty,
                    const storage::Tensor& counts) {
  StepVars vars{{}, {meta.var(), state.var(), dirty.var()}};
  if (counts) vars.writes.push_back(counts.var());
  const engine::Context ctx = meta.ctx();
  int64_t* stats = args->tags + StateElements(args->num_sets * kWays, args->num_tables) -
                   CountElements(args->num_tables);
  const int64_t stat_count = CountElements(args->num_tables);
  PushCacheOp(engine, "CachedTbe::Initialize", ctx, engine::FnProperty::kNormal, vars,
              [args = std::move(args), values = TableArrays(tables), meta = meta.data<int64_t>(),
               stats, stat_count, ctx](void* stream) {
                if (ctx.is_gpu()) {
                  InitializeCuda(*args, values.data(), static_cast<int64_t>(values.size()), meta,
                                 stats, stat_count, ctx.device_id, stream);
                } else {
                  std::copy(values.begin(), values.end(), meta);
                  ResetCpu(*args);
                  std::fill(stats, stats + stat_count, 0);
                  if (args->counts != nullptr) {
                    std::fill(args->counts, args->counts + args->total_rows, 0);
                  }
                }
                return engine::DeferredCheck();
              });
}

namespace {

// `count` elements of a cache array, host or device, copied to the host.
template <typename T>
std::vector<T> Read(const CacheArgs& cache, const T* from, int64_t count) {
  std::vector<T> values(static_cast<std::size_t>(count), 0);
  if (from == nullptr) return values;
  if (cache.device < 0) {
    std::copy(from, from + count, values.begin());
  } else {
    ReadDeviceCuda(from, values.data(), count * static_cast<int64_t>(sizeof(T)), cache.device);
  }
  return values;
}

}  // namespace

std::vector<int64_t> ReadStats(const CacheArgs& cache, bool total) {
  return Read<int64_t>(cache, total ? cache.stats_total : cache.stats_step,
                       StatElements(cache.num_tables));
}

CacheSnapshot ReadSnapshot(const CacheArgs& cache) {
  const int64_t slots = cache.num_sets * kWays;
  return CacheSnapshot{.tags = Read<int64_t>(cache, cache.tags, slots),
                       .timestamps = Read<int64_t>(cache, cache.timestamps, slots),
                       .locks = Read<int32_t>(cache, cache.locks, slots),
                       .dirty = Read<int32_t>(cache, cache.dirty, slots)};
}

}  // namespace ember::cache::internal
