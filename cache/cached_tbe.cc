// CachedTbe: sizing, memory and statistics (cached_tbe.h). The steps are in
// cached_tbe_steps.cc.

#include "cache/cached_tbe.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "cache/internal/cache_arrays.h"
#include "cache/internal/cache_kernels.h"
#include "cache/internal/home_memory.h"
#include "cache/internal/host_copy_threads.h"
#include "cache/internal/host_row_moves.h"
#include "engine/error.h"
#include "ops/elementwise.h"
#include "storage/storage.h"

namespace ember::cache {
namespace {

using internal::CacheArgs;
using storage::DType;
using storage::Tensor;

constexpr int64_t kWays = internal::kWays;
static_assert(kWays == kCacheWays);

void CheckOptions(const CacheOptions& options) {
  if (options.dtype != DType::kF32 && options.dtype != DType::kF16 &&
      options.dtype != DType::kBF16) {
    throw InvalidArgument(
        fmt::format("[CachedTbe] rows of dtype {}; a cache holds f32, f16 or bf16",
                    storage::ToString(options.dtype)));
  }
  if (!(options.load_factor > 0) || !std::isfinite(options.load_factor)) {
    throw InvalidArgument(
        fmt::format("[CachedTbe] load_factor {} must be positive", options.load_factor));
  }
  if (options.cache_bytes < 0 || options.prefetch_temp_bytes < 0 || options.staging_bytes < 0) {
    throw InvalidArgument(fmt::format(
        "[CachedTbe] cache_bytes {}, prefetch_temp_bytes {} and staging_bytes {} must not be "
        "negative",
        options.cache_bytes, options.prefetch_temp_bytes, options.staging_bytes));
  }
  if (options.link_warps < 0) {
    throw InvalidArgument(
        fmt::format("[CachedTbe] link_warps {} must not be negative", options.link_warps));
  }
  if (options.fill_threads < 1 || options.fill_threads > 64) {
    throw InvalidArgument(
        fmt::format("[CachedTbe] fill_threads {} must be from 1 to 64", options.fill_threads));
  }
  if (options.prefetch_passes < 1) {
    throw InvalidArgument(
        fmt::format("[CachedTbe] prefetch_passes {} must be at least 1", options.prefetch_passes));
  }
}

storage::StorageManager& DeviceMemoryFor(engine::Context ctx) {
  return ctx.is_gpu() ? storage::GetStorage(storage::MemoryKind::kDevice, ctx.device_id)
                      : storage::GetStorage(storage::MemoryKind::kCpu);
}

std::size_t HomeBytes(const ops::TbeTables& tables, const CacheOptions& options) {
  return static_cast<std::size_t>(tables.total_elements() *
                                  static_cast<int64_t>(storage::SizeOf(options.dtype)));
}

int64_t SlotDim(const ops::TbeTables& tables) {
  int64_t dim = 0;
  for (int t = 0; t < tables.num_tables(); ++t) dim = std::max(dim, tables.dim(t));
  return dim;
}

// Sets from the byte budget or the load factor, unchecked.
int64_t SetsFor(const ops::TbeTables& tables, const CacheOptions& options, int64_t slot_dim) {
  if (options.cache_bytes > 0) {
    return options.cache_bytes / (CacheSlotBytes(slot_dim, options.dtype) * kWays);
  }
  // Rows first, truncated, as FBGEMM sizes its cache: a ceiling of the
  // product would add a set for its rounding error (3,200 rows at 0.07:
  // 224.00000000000003 rows).
  const auto rows =
      static_cast<int64_t>(options.load_factor * static_cast<double>(tables.total_rows()));
  return std::max<int64_t>(1, (rows + kWays - 1) / kWays);
}

// SetsFor, checked: at least one, and few enough that slot numbers fit the
// i32 locations.
int64_t NumSets(const ops::TbeTables& tables, const CacheOptions& options, int64_t slot_dim) {
  const int64_t sets = SetsFor(tables, options, slot_dim);
  if (sets < 1) {
    const int64_t slot_bytes = CacheSlotBytes(slot_dim, options.dtype);
    throw InvalidArgument(fmt::format(
        "[CachedTbe] a cache of {} bytes is smaller than one set: {} ways of {} bytes (a row "
        "of dim {} and its state) need {} bytes",
        options.cache_bytes, kWays, slot_bytes, slot_dim, kWays * slot_bytes));
  }
  const int64_t max_sets = std::numeric_limits<int32_t>::max() / kWays;
  if (sets > max_sets) {
    throw InvalidArgument(
        fmt::format("[CachedTbe] {} sets ({} slots) exceed the {} slots a cache "
                    "may have",
                    sets, sets * kWays, max_sets * kWays));
  }
  return sets;
}

}  // namespace

CacheCounts& CacheCounts::operator+=(const CacheCounts& other) {
  requested += other.requested;
  unique += other.unique;
  unique_misses += other.unique_misses;
  inserted += other.inserted;
  evicted += other.evicted;
  unique_conflict_misses += other.unique_conflict_misses;
  conflict_miss_indices += other.conflict_miss_indices;
  bytes_to_cache += other.bytes_to_cache;
  bytes_to_home += other.bytes_to_home;
  return *this;
}

CachedTbe::CachedTbe(engine::Engine& engine, ops::TbeTables tables, const CacheOptions& options,
                     storage::StorageManager* device_memory)
    : engine_(engine),
      tables_(std::move(tables)),
      options_(options),
      device_memory_(device_memory != nullptr ? *device_memory : DeviceMemoryFor(options.ctx)),
      home_memory_(
          internal::HomeMemoryFor(options.ctx, options.home, HomeBytes(tables_, options))) {
  CheckOptions(options_);
  slot_dim_ = SlotDim(tables_);
  num_sets_ = NumSets(tables_, options_, slot_dim_);
  const engine::Context ctx = options_.ctx;
  home_ = Tensor::Empty(engine_, home_memory_, {tables_.total_elements()}, options_.dtype, ctx);
  slots_ = Tensor::Empty(engine_, device_memory_, {num_slots(), slot_dim_}, options_.dtype, ctx);
  state_ =
      Tensor::Empty(engine_, device_memory_,
                    {internal::StateElements(num_slots(), tables_.num_tables())}, DType::kI64, ctx);
  dirty_ = Tensor::Empty(engine_, device_memory_, {num_slots()}, DType::kI32, ctx);
  if (options_.policy == CachePolicy::kLfu) {
    counts_ = Tensor::Empty(engine_, home_memory_, {tables_.total_rows()}, DType::kI64, ctx);
  }
  tables_meta_ = Tensor::Empty(engine_, device_memory_, {internal::TableArrayElements(tables_)},
                               DType::kI64, ctx);
  CacheArgs args = internal::MakeCacheArgs(tables_, options_, num_sets_, slot_dim_, home_, slots_,
                                           state_, dirty_, counts_, tables_meta_);
  std::shared_ptr<void> host_fills;
  if (args.home_mapped) AddStaging(args);
  if (args.home_mapped && options_.mapped_fills == MappedFills::kCopyEngine &&
      args.staging_capacity > 0) {
    AddHostFills(args, host_fills);
  }
  // Aliased: the args' owner keeps the host fills too.
  auto owned = std::make_shared<std::pair<CacheArgs, std::shared_ptr<void>>>(args, host_fills);
  args_ = std::shared_ptr<const CacheArgs>(owned, &owned->first);
  internal::PushInitialize(engine_, tables_, args_, tables_meta_, state_, dirty_, counts_);
}

CachedTbe::~CachedTbe() = default;  // the tensors delete themselves through the engine

int64_t CacheSlotsFor(const ops::TbeTables& tables, const CacheOptions& options) {
  return SetsFor(tables, options, SlotDim(tables)) * kWays;
}

int64_t CachedTbe::num_slots() const { return num_sets_ * kWays; }

// No staging rows when staging_bytes hold less than one; the per-slot
// part always (a prefetch's evictions without a staging row wait there).
void CachedTbe::AddStaging(CacheArgs& args) {
  const int64_t row_bytes = slot_dim_ * static_cast<int64_t>(storage::SizeOf(options_.dtype));
  const int64_t rows = internal::StagingRows(options_.staging_bytes, row_bytes);
  staging_ = Tensor::Empty(engine_, device_memory_,
                           {internal::StagingElements(rows, row_bytes, num_slots())}, DType::kI64,
                           options_.ctx);
  internal::SetStaging(staging_, rows, row_bytes, &args);
}

void CachedTbe::AddHostFills(CacheArgs& args, std::shared_ptr<void>& owner) {
  auto fills = std::make_shared<internal::HostFills>();
  fills->cache = args;
  fills->table_arrays = internal::TableArrays(tables_);
  internal::PointAtTableArrays(fills->table_arrays.data(), tables_.num_tables(), &fills->cache);
  const int64_t bytes = internal::HostFillBytes(args);
  host_staging_ = Tensor::Empty(engine_, {(bytes + 7) / 8}, DType::kI64, engine::Context::CPU(),
                                storage::MemoryKind::kPinned);
  fills->pinned = host_staging_.data();
  fills->threads = std::make_unique<internal::HostCopyThreads>(options_.fill_threads);
  args.host_fills = fills.get();
  owner = std::move(fills);
}

// The fewest passes whose scratch fits the budget (the scratch shrinks as
// passes grow), or one index a pass.
int CachedTbe::PassesFor(int64_t num_indices) const {
  if (options_.prefetch_temp_bytes <= 0) return options_.prefetch_passes;
  const auto fits = [&](int64_t passes) {
    return internal::PrefetchScratchBytes(*args_, num_indices, static_cast<int>(passes)) <=
           options_.prefetch_temp_bytes;
  };
  int64_t lo = 1;
  int64_t hi =
      std::max<int64_t>(1, std::min<int64_t>(num_indices, std::numeric_limits<int>::max()));
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (fits(mid)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return static_cast<int>(lo);
}

storage::Tensor& CachedTbe::OptimizerState(Tensor& state, int64_t elements,
                                           storage::StorageManager& memory) {
  if (!state) {
    state = Tensor::Empty(engine_, memory, {elements}, DType::kF32, options_.ctx);
    ops::Fill(state, 0.0f);
  }
  return state;
}

storage::Tensor& CachedTbe::MakeAccumulator() {
  return OptimizerState(accumulator_, tables_.total_rows(), device_memory_);
}

void CachedTbe::MakeAdamMoments() {
  OptimizerState(adam_m_, tables_.total_elements(), home_memory_);
  OptimizerState(adam_v_, tables_.total_elements(), home_memory_);
}

CacheSnapshot CachedTbe::Snapshot() {
  engine_.WaitForVar(state_.var());
  engine_.WaitForVar(dirty_.var());
  return internal::ReadSnapshot(*args_);
}

CacheStats CachedTbe::LastStepStats() { return ReadStats(/*total=*/false); }
CacheStats CachedTbe::TotalStats() { return ReadStats(/*total=*/true); }

CacheStats CachedTbe::ReadStats(bool total) {
  engine_.WaitForVar(state_.var());
  const std::vector<int64_t> raw = internal::ReadStats(*args_, total);
  CacheStats stats;
  auto counts_at = [&](int row) {
    const int64_t* f = &raw[static_cast<std::size_t>(row) * internal::kStatFields];
    return CacheCounts{.requested = f[internal::kRequested],
                       .unique = f[internal::kUnique],
                       .unique_misses = f[internal::kUniqueMisses],
                       .inserted = f[internal::kInserted],
                       .evicted = f[internal::kEvicted],
                       .unique_conflict_misses = f[internal::kUniqueConflictMisses],
                       .conflict_miss_indices = f[internal::kConflictMissIndices],
                       .bytes_to_cache = f[internal::kBytesToCache],
                       .bytes_to_home = f[internal::kBytesToHome]};
  };
  for (int t = 0; t < tables_.num_tables(); ++t) stats.tables.push_back(counts_at(t));
  stats.all = counts_at(tables_.num_tables());
  if (const internal::HostFills* fills = args_->host_fills) {
    stats.copy_engine_fills = total ? fills->total_fills : fills->last_fills;
  }
  return stats;
}

}  // namespace ember::cache
