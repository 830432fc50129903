// CachedTbe on a GPU against CachedTbe on the CPU (the reference kernels),
// pushed alike on one engine, compared bit for bit after every step: tags,
// timestamps and locks (Snapshot), each batch's locations (the slots, the
// locked slots as a set and their count), the statistics, and every byte of
// the slots and the home rows (and LFU's counts). Traces cover LRU and
// LFU (FBGEMM's admission: repeats, refusals, ties, runs of many windows), 1, 6 and 12
// passes, f32, f16 and bf16 rows, i32 and i64 indices, a one-set cache full
// of conflicts, misses enough for the GPU's tiled radix sort, several
// batches in flight, warm, flush and reset, an all-hit prefetch, and a bad
// batch (the same message as the CPU's, nothing changed). Runs on the
// per-device engine, plain and Async; skips without a GPU.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include "cache/cached_tbe.h"
#include "engine/base/device.h"
#include "engine/engine.h"
#include "engine/error.h"
#include "ops/elementwise.h"
#include "storage/storage.h"
#include "tests/cache/cache_test_util.h"

namespace ember::cache::testing {
namespace {

using engine::Context;
using storage::DType;
using ::testing::HasSubstr;

constexpr int kWays = 32;

struct Config {
  CachePolicy policy = CachePolicy::kLru;
  int passes = 1;
  DType dtype = DType::kF32;
  DType index_dtype = DType::kI64;
  int64_t sets = 4;
  HomeMemory home = HomeMemory::kAuto;
  bool gpu_stats = true;  // the CPU twin always counts: PrefetchCpu writes its statistics unchecked
  int64_t staging_bytes = CacheOptions{}.staging_bytes;  // of the GPU cache's mapped home
  WriteBack write_back = WriteBack::kEveryRow;
  int link_warps = 0;                              // of the GPU cache
  MappedFills mapped_fills = MappedFills::kWarps;  // of the GPU cache's mapped home
  int fill_threads = 8;
};

std::string Describe(const Config& c) {
  return std::string(c.policy == CachePolicy::kLru ? "LRU" : "LFU") + ", " +
         std::to_string(c.passes) + " passes, " + std::string(storage::ToString(c.dtype)) +
         " rows, " + std::string(storage::ToString(c.index_dtype)) + " indices, " +
         std::to_string(c.sets) + " sets" +
         (c.home == HomeMemory::kMapped
              ? ", mapped home, " + std::to_string(c.staging_bytes) + " staging bytes"
              : "") +
         (c.gpu_stats ? "" : ", GPU statistics off") +
         (c.write_back == WriteBack::kDirtyRows ? ", dirty rows written back" : "") +
         (c.link_warps > 0 ? ", " + std::to_string(c.link_warps) + " link warps" : "") +
         (c.mapped_fills == MappedFills::kCopyEngine
              ? ", copy-engine fills, " + std::to_string(c.fill_threads) + " host threads"
              : "");
}

int64_t ElementBytes(DType dtype) { return dtype == DType::kF32 ? 4 : 2; }

// Bags of one batch, table-major: bags[t * batch_size + b].
struct Bags {
  int64_t batch_size = 0;
  std::vector<std::vector<int64_t>> bags;
};

// Bags of 0..max_bag rows; a row is one of the first `hot` rows of its table
// with probability hot_share, else any.
Bags RandomBags(std::mt19937_64& rng, const ops::TbeTables& tables, int64_t batch_size, int max_bag,
                double hot_share, int64_t hot) {
  Bags out{batch_size, {}};
  std::uniform_int_distribution<int> length(0, max_bag);
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  for (int t = 0; t < tables.num_tables(); ++t) {
    for (int64_t b = 0; b < batch_size; ++b) {
      std::vector<int64_t> bag(static_cast<std::size_t>(length(rng)));
      for (int64_t& row : bag) {
        const int64_t range =
            coin(rng) < hot_share ? std::min(hot, tables.rows(t)) : tables.rows(t);
        row = std::uniform_int_distribution<int64_t>(0, range - 1)(rng);
      }
      out.bags.push_back(std::move(bag));
    }
  }
  return out;
}

// `count` batches of RandomBags.
std::vector<Bags> RandomBatches(std::mt19937_64& rng, const ops::TbeTables& tables, int count,
                                int64_t batch_size, int max_bag, double hot_share, int64_t hot) {
  std::vector<Bags> batches;
  batches.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    batches.push_back(RandomBags(rng, tables, batch_size, max_bag, hot_share, hot));
  }
  return batches;
}

Batch RawBatch(engine::Engine& engine, Context ctx, const std::vector<int64_t>& indices,
               const std::vector<int64_t>& offsets, int64_t batch_size, DType index_dtype) {
  if (index_dtype == DType::kI32) {
    return Batch{FromHost(engine, ctx, std::vector<int32_t>(indices.begin(), indices.end())),
                 FromHost(engine, ctx, std::vector<int32_t>(offsets.begin(), offsets.end())),
                 batch_size};
  }
  return Batch{FromHost(engine, ctx, indices), FromHost(engine, ctx, offsets), batch_size};
}

Batch ToBatch(engine::Engine& engine, Context ctx, const Bags& bags, DType index_dtype) {
  const FlatBags flat = Flatten(bags.bags);
  return RawBatch(engine, ctx, flat.indices, flat.offsets, bags.batch_size, index_dtype);
}

int64_t NumIndices(const Bags& bags) {
  int64_t n = 0;
  for (const auto& bag : bags.bags) n += static_cast<int64_t>(bag.size());
  return n;
}

// Every byte of a tensor (any context), after the ops writing it.
std::vector<uint8_t> BytesOf(const storage::Tensor& tensor) {
  std::vector<uint8_t> bytes(tensor.bytes());
  if (tensor.ctx().is_gpu()) {
    storage::Tensor host =
        storage::Tensor::Empty(tensor.engine(), tensor.shape(), tensor.dtype(), Context::CPU());
    tensor.CopyTo(host);
    host.WaitToRead();
    if (!bytes.empty()) std::memcpy(bytes.data(), host.data(), bytes.size());
  } else {
    tensor.WaitToRead();
    if (!bytes.empty()) std::memcpy(bytes.data(), tensor.data(), bytes.size());
  }
  return bytes;
}

std::vector<uint8_t> RandomBytes(uint64_t seed, std::size_t n) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> bytes(n);
  for (uint8_t& byte : bytes) byte = static_cast<uint8_t>(rng());
  return bytes;
}

// Random values of `dtype` with every bit pattern but NaN and infinity (an
// exponent of all ones keeps only its top bit), so that a backward on them
// rounds alike on both devices (a GPU returns one canonical NaN).
std::vector<uint8_t> RandomFiniteBytes(uint64_t seed, std::size_t n, DType dtype) {
  std::vector<uint8_t> bytes = RandomBytes(seed, n);
  // The exponent's bits within an element's top 16 bits (little-endian).
  const uint16_t exponent = dtype == DType::kF16 ? 0x7c00 : 0x7f80;
  const std::size_t width = static_cast<std::size_t>(ElementBytes(dtype));
  for (std::size_t at = width - 2; at + 2 <= n; at += width) {
    uint16_t top = 0;
    std::memcpy(&top, &bytes[at], 2);
    if ((top & exponent) == exponent) top &= static_cast<uint16_t>(~(exponent & (exponent >> 1)));
    std::memcpy(&bytes[at], &top, 2);
  }
  return bytes;
}

// Equal vectors, or one failure naming the first difference and how many.
template <typename T>
void ExpectSame(const std::vector<T>& cpu, const std::vector<T>& gpu, const std::string& what) {
  ASSERT_EQ(cpu.size(), gpu.size()) << what;
  std::size_t first = cpu.size();
  std::size_t differ = 0;
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    if (cpu[i] == gpu[i]) continue;
    if (differ++ == 0) first = i;
  }
  if (differ == 0) return;
  ADD_FAILURE() << what << ": " << differ << " of " << cpu.size() << " differ, the first at ["
                << first << "]: CPU " << +cpu[first] << ", GPU " << +gpu[first];
}

void ExpectSameCounts(const CacheCounts& cpu, const CacheCounts& gpu, const std::string& what) {
  EXPECT_EQ(cpu.requested, gpu.requested) << what << ": requested";
  EXPECT_EQ(cpu.unique, gpu.unique) << what << ": unique";
  EXPECT_EQ(cpu.unique_misses, gpu.unique_misses) << what << ": unique_misses";
  EXPECT_EQ(cpu.inserted, gpu.inserted) << what << ": inserted";
  EXPECT_EQ(cpu.evicted, gpu.evicted) << what << ": evicted";
  EXPECT_EQ(cpu.unique_conflict_misses, gpu.unique_conflict_misses)
      << what << ": unique_conflict_misses";
  EXPECT_EQ(cpu.conflict_miss_indices, gpu.conflict_miss_indices)
      << what << ": conflict_miss_indices";
  EXPECT_EQ(cpu.bytes_to_cache, gpu.bytes_to_cache) << what << ": bytes_to_cache";
  EXPECT_EQ(cpu.bytes_to_home, gpu.bytes_to_home) << what << ": bytes_to_home";
}

void ExpectSameStats(const CacheStats& cpu, const CacheStats& gpu, const std::string& what) {
  ASSERT_EQ(cpu.tables.size(), gpu.tables.size());
  for (std::size_t t = 0; t < cpu.tables.size(); ++t) {
    ExpectSameCounts(cpu.tables[t], gpu.tables[t], what + ", table " + std::to_string(t));
  }
  ExpectSameCounts(cpu.all, gpu.all, what + ", all tables");
}

// A batch's locations read back: the slot of each index, the locked slots
// (sorted: their order is the kernel's) and their count.
struct Where {
  std::vector<int32_t> slot_of;
  std::vector<int32_t> locked;
  int64_t num_locked = 0;
};

Where ReadWhere(const CacheLocations& where, int64_t n) {
  const std::vector<int32_t> all = ToHost<int32_t>(where.tensor());
  const int64_t capacity = where.capacity();
  Where out;
  out.slot_of.assign(all.begin(), all.begin() + n);
  std::memcpy(&out.num_locked, &all[static_cast<std::size_t>(2 * capacity)], sizeof(int64_t));
  const int64_t listed = std::clamp<int64_t>(out.num_locked, 0, capacity);
  out.locked.assign(all.begin() + capacity, all.begin() + capacity + listed);
  std::sort(out.locked.begin(), out.locked.end());
  return out;
}

// A cache on the CPU and its twin on GPU 0, with the same tables, options
// and pushes; batches and locations come in pairs.
class Twin {
 public:
  Twin(engine::Engine& engine, const ops::TbeTables& tables, const Config& config)
      : engine_(engine), config_(config) {
    int64_t slot_dim = 0;
    for (int t = 0; t < tables.num_tables(); ++t) slot_dim = std::max(slot_dim, tables.dim(t));
    CacheOptions options;
    options.dtype = config.dtype;
    options.policy = config.policy;
    options.prefetch_passes = config.passes;
    options.write_back = config.write_back;
    options.cache_bytes = config.sets * kWays * (slot_dim * ElementBytes(config.dtype) + 20);
    cpu_ = std::make_unique<CachedTbe>(engine, tables, options);
    options.ctx = Context::GPU(0);
    options.home = config.home;
    options.collect_stats = config.gpu_stats;
    options.staging_bytes = config.staging_bytes;
    options.link_warps = config.link_warps;
    options.mapped_fills = config.mapped_fills;
    options.fill_threads = config.fill_threads;
    gpu_ = std::make_unique<CachedTbe>(engine, tables, options);
    EXPECT_EQ(cpu_->num_sets(), config.sets);
    EXPECT_EQ(gpu_->num_sets(), config.sets);
  }

  CachedTbe& cpu() { return *cpu_; }
  CachedTbe& gpu() { return *gpu_; }

  // The same bytes in both homes and both caches' slots (slots never
  // written then compare equal too).
  void Seed(uint64_t seed) {
    WriteHome(seed);
    const std::vector<uint8_t> bytes =
        RandomFiniteBytes(seed + 1, cpu_->slots().bytes(), config_.dtype);
    cpu_->slots().WaitToWrite();
    std::memcpy(cpu_->slots().data(), bytes.data(), bytes.size());
    storage::Tensor host = storage::Tensor::Empty(engine_, gpu_->slots().shape(),
                                                  gpu_->slots().dtype(), Context::CPU());
    host.WaitToWrite();
    std::memcpy(host.data(), bytes.data(), bytes.size());
    // CachedTbe shows its slots read-only; a backward writes them through
    // the var the same way.
    host.CopyTo(const_cast<storage::Tensor&>(gpu_->slots()));
    gpu_->slots().WaitToRead();  // before any prefetch, which writes slots undeclared
  }

  // New bytes at home (as a backward of missed rows writes them), so that
  // write-backs and fills of later steps move values that differ.
  void WriteHome(uint64_t seed) {
    const std::vector<uint8_t> bytes = RandomFiniteBytes(seed, cpu_->home().bytes(), config_.dtype);
    for (CachedTbe* cache : {cpu_.get(), gpu_.get()}) {
      cache->home().WaitToWrite();  // host-addressable on both (managed or mapped on the GPU)
      std::memcpy(cache->home().data(), bytes.data(), bytes.size());
    }
  }

  int AddBatch(const Bags& bags) {
    sizes_.push_back(NumIndices(bags));
    cpu_batches_.push_back(ToBatch(engine_, Context::CPU(), bags, config_.index_dtype));
    gpu_batches_.push_back(ToBatch(engine_, Context::GPU(0), bags, config_.index_dtype));
    cpu_where_.push_back(cpu_->NewLocations(sizes_.back()));
    gpu_where_.push_back(gpu_->NewLocations(sizes_.back()));
    return static_cast<int>(sizes_.size()) - 1;
  }

  void Prefetch(int i) {
    cpu_->Prefetch(cpu_batches_[i].view(), cpu_where_[i]);
    gpu_->Prefetch(gpu_batches_[i].view(), gpu_where_[i]);
  }
  void Relookup(int i) {
    cpu_->Relookup(cpu_batches_[i].view(), cpu_where_[i]);
    gpu_->Relookup(gpu_batches_[i].view(), gpu_where_[i]);
  }
  // SGD at rate 1 with gradients of small integers (sums exact in any
  // order, one rounding a value on both devices): the slots it updates
  // become dirty, so later evictions and flushes write them home.
  void Backward(int i, uint64_t seed) {
    const int64_t rows = cpu_batches_[i].batch_size;
    const int64_t cols = cpu_->tables().total_dim();
    std::mt19937_64 rng(seed);
    std::vector<float> values(static_cast<std::size_t>(rows * cols));
    for (float& g : values) g = static_cast<float>(static_cast<int>(rng() % 7) - 3);
    const ops::SgdOptions sgd{.learning_rate = 1.0f};
    cpu_->BackwardSgd(cpu_batches_[i].view(), cpu_where_[i],
                      FromHost(engine_, Context::CPU(), values, {rows, cols}), sgd);
    gpu_->BackwardSgd(gpu_batches_[i].view(), gpu_where_[i],
                      FromHost(engine_, Context::GPU(0), values, {rows, cols}), sgd);
  }
  void Lookup(int i) {
    cpu_->LookupForInference(cpu_batches_[i].view(), cpu_where_[i]);
    gpu_->LookupForInference(gpu_batches_[i].view(), gpu_where_[i]);
  }
  void Warm(const std::vector<int64_t>& rows) {
    cpu_->Warm(rows);
    gpu_->Warm(rows);
  }
  void Flush() {
    cpu_->Flush();
    gpu_->Flush();
  }
  void Reset() {
    cpu_->Reset();
    gpu_->Reset();
  }

  const Batch& gpu_batch(int i) const { return gpu_batches_[i]; }
  CacheLocations& cpu_where(int i) { return cpu_where_[i]; }
  CacheLocations& gpu_where(int i) { return gpu_where_[i]; }
  int64_t size(int i) const { return sizes_[i]; }

  void ExpectSameLocations(int i, const std::string& what) {
    const Where cpu = ReadWhere(cpu_where_[i], sizes_[i]);
    const Where gpu = ReadWhere(gpu_where_[i], sizes_[i]);
    const std::string of = what + ", batch " + std::to_string(i);
    ExpectSame(cpu.slot_of, gpu.slot_of, of + ": slot of each index");
    EXPECT_EQ(cpu.num_locked, gpu.num_locked) << of << ": locked count";
    ExpectSame(cpu.locked, gpu.locked, of + ": locked slots (as a set)");
  }

  void ExpectSameState(const std::string& what) {
    engine_.WaitForAll();
    const CacheSnapshot cpu = cpu_->Snapshot();
    const CacheSnapshot gpu = gpu_->Snapshot();
    ExpectSame(cpu.tags, gpu.tags, what + ": tags");
    ExpectSame(cpu.timestamps, gpu.timestamps, what + ": timestamps");
    ExpectSame(cpu.locks, gpu.locks, what + ": locks");
    ExpectSame(cpu.dirty, gpu.dirty, what + ": dirty flags");
    if (config_.policy == CachePolicy::kLfu) {
      ExpectSame(ToHost<int64_t>(cpu_->lfu_counts()), ToHost<int64_t>(gpu_->lfu_counts()),
                 what + ": LFU counts");
    }
    if (config_.gpu_stats) {
      ExpectSameStats(cpu_->LastStepStats(), gpu_->LastStepStats(), what + ": last step");
      ExpectSameStats(cpu_->TotalStats(), gpu_->TotalStats(), what + ": totals");
    } else {
      ExpectSameStats(CacheStats{std::vector<CacheCounts>(cpu_->tables().num_tables()), {}},
                      gpu_->TotalStats(), what + ": statistics off read zero");
    }
    ExpectSame(BytesOf(cpu_->slots()), BytesOf(gpu_->slots()), what + ": slot bytes");
    ExpectSame(BytesOf(cpu_->home()), BytesOf(gpu_->home()), what + ": home bytes");
  }

 private:
  engine::Engine& engine_;
  const Config config_;
  std::unique_ptr<CachedTbe> cpu_;
  std::unique_ptr<CachedTbe> gpu_;
  std::deque<Batch> cpu_batches_;
  std::deque<Batch> gpu_batches_;
  std::deque<CacheLocations> cpu_where_;
  std::deque<CacheLocations> gpu_where_;
  std::vector<int64_t> sizes_;
};

// Three tables: a dim of 3 (rows of 6 or 12 bytes: the narrow copies) and
// the slot dim itself (16).
ops::TbeTables SmallTables() { return ops::TbeTables({300, 40, 1000}, {8, 3, 16}); }

class CacheCudaTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (ember::GpuCount() == 0) GTEST_SKIP() << "no CUDA device";
    engine_ = engine::CreateEngine(engine::ParseEngineType(GetParam()));
  }
  engine::Engine& engine() { return *engine_; }

  // A batch with a bad index, then one with bad offsets: each fails with the
  // CPU's message and leaves state, statistics and locations unchanged.
  void ExpectABadBatchChangesNothing(const Config& config);

  // Batches in the prefetch pipeline's order (Prefetch(i + 1) before
  // Relookup(i)), compared after every step; a backward of two batches in
  // three (dirty rows and clean ones); new home bytes every other batch; a
  // flush at the end.
  void RunPipeline(Twin& twin, const std::vector<Bags>& batches, uint64_t seed) {
    std::vector<int> ids;
    ids.reserve(batches.size());
    for (const Bags& bags : batches) ids.push_back(twin.AddBatch(bags));
    twin.Seed(seed);
    twin.Prefetch(ids[0]);
    twin.ExpectSameLocations(ids[0], "prefetch");
    twin.ExpectSameState("prefetch 0");
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const std::string step = std::to_string(i);
      if (i + 1 < ids.size()) {
        twin.Prefetch(ids[i + 1]);
        twin.ExpectSameLocations(ids[i + 1], "prefetch");
        twin.ExpectSameState("prefetch " + std::to_string(i + 1) + " (batch " + step +
                             " in flight)");
      }
      twin.Relookup(ids[i]);
      twin.ExpectSameLocations(ids[i], "relookup");
      twin.ExpectSameState("relookup " + step);
      if (i % 3 != 2) {  // most batches train, so that evictions write rows back
        twin.Backward(ids[i], seed + 200 + i);
        twin.ExpectSameState("backward " + step);
      }
      if (i % 2 == 1) twin.WriteHome(seed + 100 + i);
      if (::testing::Test::HasFailure()) return;  // one trace's first divergence is enough
    }
    twin.Flush();
    twin.ExpectSameState("flush");
  }

  // Six small batches and a large one (over 2048 distinct misses in one pass).
  static std::vector<Bags> Trace(uint64_t seed) {
    std::mt19937_64 rng(seed);
    const ops::TbeTables tables = SmallTables();
    std::vector<Bags> batches = RandomBatches(rng, tables, 6, 8, 10, 0.6, 40);
    batches.push_back(RandomBags(rng, tables, 64, 60, 0.2, 40));
    return batches;
  }

  // Three batches of about 30k indices over 150k rows (two tables), 30% of
  // them on `hot` rows, a pass of them missing more rows than one tile of
  // the radix sort, through the pipeline; the GPU's totals.
  CacheStats RunManyMisses(const Config& config, uint64_t batch_seed, uint64_t home_seed,
                           int64_t hot = 3000) {
    const ops::TbeTables tables({100000, 50000}, {4, 8});
    Twin twin(engine(), tables, config);
    std::mt19937_64 rng(batch_seed);
    RunPipeline(twin, RandomBatches(rng, tables, 3, 1000, 30, 0.3, hot), home_seed);
    return twin.gpu().TotalStats();
  }

  std::unique_ptr<engine::Engine> engine_;
};

TEST_P(CacheCudaTest, MatchesCpuOnRandomTraces) {
  uint64_t seed = 1;
  for (CachePolicy policy : {CachePolicy::kLru, CachePolicy::kLfu}) {
    for (int passes : {1, 6, 12}) {
      for (DType dtype : {DType::kF32, DType::kF16}) {
        for (DType index_dtype : {DType::kI32, DType::kI64}) {
          Config config{policy, passes, dtype, index_dtype};
          ++seed;
          if (seed % 2 == 0) config.write_back = WriteBack::kDirtyRows;
          SCOPED_TRACE(Describe(config));
          Twin twin(engine(), SmallTables(), config);
          RunPipeline(twin, Trace(seed), seed * 1000);
          if (HasFailure()) return;
          const CacheCounts all = twin.gpu().TotalStats().all;
          EXPECT_GT(all.evicted, 0) << "the trace evicts";
          EXPECT_GT(all.unique_conflict_misses, 0) << "the trace has conflict misses";
        }
      }
    }
  }
}

// A mapped home's evictions go home through the staging (all of a pass's,
// or only the first few, the rest written home first) or without it.
TEST_P(CacheCudaTest, MappedHomeBf16AndStatisticsOffMatchCpu) {
  // SmallTables' widest bf16 row, and its id and staging row (twice each).
  constexpr int64_t kStagingRowBytes = 16 * 2 + 24;
  std::vector<Config> configs;
  for (const int64_t staging_rows : {int64_t{1} << 20, int64_t{3}, int64_t{0}}) {
    for (const int passes : {1, 6}) {
      Config mapped{CachePolicy::kLfu, passes, DType::kBF16, DType::kI32};
      mapped.home = HomeMemory::kMapped;
      mapped.staging_bytes = staging_rows * kStagingRowBytes;
      if (passes > 1) mapped.write_back = WriteBack::kDirtyRows;
      configs.push_back(mapped);
    }
  }
  Config no_stats{CachePolicy::kLru, 1, DType::kF32, DType::kI64};
  no_stats.gpu_stats = false;
  configs.push_back(no_stats);
  uint64_t seed = 50;
  for (const Config& config : configs) {
    SCOPED_TRACE(Describe(config));
    Twin twin(engine(), SmallTables(), config);
    ++seed;
    RunPipeline(twin, Trace(seed), seed * 1000);
  }
}

TEST_P(CacheCudaTest, OneSetCacheWithConflictsMatchesCpu) {
  for (CachePolicy policy : {CachePolicy::kLru, CachePolicy::kLfu}) {
    for (int passes : {1, 6}) {
      const Config config{policy, passes, DType::kF32, DType::kI64, /*sets=*/1};
      SCOPED_TRACE(Describe(config));
      Twin twin(engine(), SmallTables(), config);
      std::mt19937_64 rng(7 + passes);
      RunPipeline(twin, RandomBatches(rng, SmallTables(), 5, 4, 20, 0.5, 50), 77);
      EXPECT_GT(twin.gpu().TotalStats().all.unique_conflict_misses, 0) << "the trace has conflicts";
    }
  }
}

// LFU's admission (FBGEMM's) on one set: rows 0..15 of count 4 and 16..31
// of count 2 fill it; then 100 new rows, row 100 + i (i % 4) + 1 times, in
// a shuffled batch: a run of about 250 misses, eight windows of a warp,
// whose best 32 rows by count (25 of count 4, then the lowest of count 3)
// are offered the ways in increasing count: the 16 of count 2, then those
// of count 4 (ties admitted), and the rest refused. Then rows refused
// before come back hotter, a Reset zeroes the counts, and it all runs
// again on the empty cache; in one pass and in three.
TEST_P(CacheCudaTest, LfuAdmissionOverAManyWindowRunMatchesCpu) {
  for (const int passes : {1, 3}) {
    const Config config{CachePolicy::kLfu, passes, DType::kF32, DType::kI64, /*sets=*/1};
    SCOPED_TRACE(Describe(config));
    Twin twin(engine(), SmallTables(), config);
    std::mt19937_64 rng(83 + passes);
    auto one_bag = [](std::vector<int64_t> rows) { return Bags{1, {std::move(rows), {}, {}}}; };
    std::vector<int64_t> warm;
    for (int64_t row = 0; row < 32; ++row) {
      for (int i = 0; i < (row < 16 ? 4 : 2); ++i) warm.push_back(row);
    }
    std::vector<int64_t> many;
    for (int64_t i = 0; i < 100; ++i) {
      for (int64_t k = 0; k <= i % 4; ++k) many.push_back(100 + i);
    }
    std::shuffle(many.begin(), many.end(), rng);
    std::vector<int64_t> back;  // rows refused above, now three more times
    for (int64_t i = 60; i < 100; i += 3) {
      for (int k = 0; k < 3; ++k) back.push_back(100 + i);
    }
    std::shuffle(back.begin(), back.end(), rng);
    const int ids[] = {twin.AddBatch(one_bag(warm)), twin.AddBatch(one_bag(many)),
                       twin.AddBatch(one_bag(back))};
    twin.Seed(13);
    auto step = [&](int id, const std::string& what) {
      twin.Prefetch(id);
      twin.ExpectSameLocations(id, what);
      twin.ExpectSameState(what);
      twin.Relookup(id);
      twin.ExpectSameState(what + ", relookup");
    };
    for (int round = 0; round < 2; ++round) {
      const std::string of = round == 0 ? "" : " after a reset";
      step(ids[0], "warm rows" + of);
      step(ids[1], "a run of eight windows" + of);
      if (passes == 1) {
        const CacheCounts last = twin.gpu().LastStepStats().all;
        EXPECT_EQ(last.inserted, 25) << "16 over rows of count 2, 9 ties of count 4";
        EXPECT_EQ(last.unique_conflict_misses, 75);
      }
      step(ids[2], "refused rows again" + of);
      if (HasFailure()) return;
      twin.Reset();
      twin.ExpectSameState("reset");
    }
  }
}

// A row that the first pass refuses and a later pass admits (its count
// grew): the earlier pass's indices get its slot too (RelocateKernel).
// Table 0's rows 0..31 count 4; rows 40 and 41 come three times in each of
// three passes (counts 3: refused; 6: admitted), beside a row a pass used
// once (refused).
TEST_P(CacheCudaTest, LfuRowAdmittedByALaterPassMatchesCpu) {
  const Config config{CachePolicy::kLfu, /*passes=*/3, DType::kF32, DType::kI64, /*sets=*/1};
  Twin twin(engine(), SmallTables(), config);
  std::vector<int64_t> warm;
  for (int i = 0; i < 4; ++i) {
    for (int64_t row = 0; row < 32; ++row) warm.push_back(row);
  }
  std::vector<int64_t> bag;
  for (int pass = 0; pass < 3; ++pass) {
    for (const int64_t row : {int64_t{40}, int64_t{41}, int64_t{50 + pass}, int64_t{40},
                              int64_t{41}, int64_t{40}, int64_t{41}}) {
      bag.push_back(row);
    }
  }
  const int first = twin.AddBatch(Bags{1, {warm, {}, {}}});
  const int later = twin.AddBatch(Bags{1, {bag, {}, {}}});
  twin.Seed(17);
  twin.Prefetch(first);
  twin.Relookup(first);
  twin.Prefetch(later);
  twin.ExpectSameLocations(later, "prefetch");
  twin.ExpectSameState("prefetch");
  const CacheCounts last = twin.gpu().LastStepStats().all;
  EXPECT_EQ(last.inserted, 2) << "rows 40 and 41, by the second pass";
  EXPECT_EQ(last.conflict_miss_indices, 3) << "rows 50..52 only";
  const Where where = ReadWhere(twin.gpu_where(later), twin.size(later));
  EXPECT_GE(where.slot_of[0], 0) << "row 40's first index, of the first pass";
  twin.Relookup(later);
  twin.ExpectSameState("relookup");
}

// Random traces of hot rows repeated within batches over few sets: LFU
// admits some misses and refuses others (conflict misses beside free ways).
TEST_P(CacheCudaTest, LfuRepeatsAndRefusalsMatchCpu) {
  for (const int passes : {1, 6}) {
    for (const int64_t sets : {int64_t{1}, int64_t{2}}) {
      const Config config{CachePolicy::kLfu, passes, DType::kF16, DType::kI32, sets};
      SCOPED_TRACE(Describe(config));
      Twin twin(engine(), SmallTables(), config);
      std::mt19937_64 rng(91 + passes + sets);
      RunPipeline(twin, RandomBatches(rng, SmallTables(), 8, 6, 24, 0.85, 60), 93);
      if (HasFailure()) return;
      const CacheCounts all = twin.gpu().TotalStats().all;
      EXPECT_GT(all.inserted, 0);
      EXPECT_GT(all.unique_conflict_misses, 0);
      EXPECT_GT(all.conflict_miss_indices, all.unique_conflict_misses) << "repeats at home";
    }
  }
}

TEST_P(CacheCudaTest, ManyMissesSortOnTheGpuLikeTheCpu) {
  // 150k rows in 256 sets: a pass of 30k indices misses ~25k distinct rows
  // (the radix sort's tiles), over 26 key bits (four 8-bit digits).
  for (CachePolicy policy : {CachePolicy::kLru, CachePolicy::kLfu}) {
    for (int passes : {1, 3}) {
      const Config config{policy, passes, DType::kF32, DType::kI64, /*sets=*/256};
      SCOPED_TRACE(Describe(config));
      EXPECT_GT(RunManyMisses(config, 11 + passes, 99).all.unique_misses, 3 * passes * 2048)
          << "passes of more misses than one tile";
    }
  }
}

// A pass of at most 4 misses a set is sorted by set alone, and each run of
// a set's misses (a hot row's repeats among them) ordered by row in the
// insert's warp; with 4 hot rows, a first pass's runs are longer than a
// warp, and the sort goes on by set and row.
TEST_P(CacheCudaTest, MissesOverManySetsGroupedBySetLikeTheCpu) {
  for (const int64_t hot : {int64_t{3000}, int64_t{4}}) {
    for (CachePolicy policy : {CachePolicy::kLru, CachePolicy::kLfu}) {
      for (int passes : {1, 3}) {
        const Config config{policy, passes, DType::kF32, DType::kI64, /*sets=*/8192};
        SCOPED_TRACE(Describe(config) + ", " + std::to_string(hot) + " hot rows");
        EXPECT_GT(RunManyMisses(config, 31 + passes, 103, hot).all.unique_misses, 3 * passes * 2048)
            << "passes of more misses than one tile";
        if (HasFailure()) return;
      }
    }
  }
}

// A mapped home defers a prefetch's fills to its last pass: with a cache
// larger than a pass, they are sorted and copied in several pieces, and
// the staged rows (more than one sort tile, or overflowing the staging)
// go home beside the first.
TEST_P(CacheCudaTest, MappedHomeFillsInPiecesMatchCpu) {
  constexpr int64_t kStagingRowBytes = 8 * 4 + 24;
  for (const int64_t staging_rows : {int64_t{1} << 20, int64_t{1000}, int64_t{0}}) {
    for (int passes : {1, 3}) {
      Config config{CachePolicy::kLru, passes, DType::kF32, DType::kI64, /*sets=*/1024};
      config.home = HomeMemory::kMapped;
      config.staging_bytes = staging_rows * kStagingRowBytes;
      if (passes > 1) config.write_back = WriteBack::kDirtyRows;
      SCOPED_TRACE(Describe(config));
      const CacheCounts totals = RunManyMisses(config, 61 + passes, 101).all;
      if (HasFailure()) return;
      EXPECT_GT(totals.evicted, 2 * 2048) << "more evictions than a tile";
    }
  }
}

// CacheOptions::link_warps narrows the grids of the kernels that move rows
// over the link; a grid far smaller than the moves (one block: 1 and 3
// warps both round to it) moves them all in turns, each row as the CPU.
TEST_P(CacheCudaTest, FewLinkWarpsMoveEveryRowLikeTheCpu) {
  for (const HomeMemory home : {HomeMemory::kManaged, HomeMemory::kMapped}) {
    for (const int warps : {1, 3, 96}) {
      Config config{CachePolicy::kLru, 2, DType::kF32, DType::kI64, /*sets=*/1024};
      config.home = home;
      config.link_warps = warps;
      config.write_back = WriteBack::kDirtyRows;
      SCOPED_TRACE(Describe(config) + (home == HomeMemory::kManaged ? ", managed home" : ""));
      const CacheCounts totals = RunManyMisses(config, 71 + warps, 107).all;
      if (HasFailure()) return;
      EXPECT_GT(totals.evicted, 2 * 2048) << "more evictions than a tile";
    }
  }
}

// What a copy-engine cache's statistics say of its prefetches: every new
// row by the copy engines where each prefetch qualifies (`all_copied`),
// else (several passes, a staging of 64 rows) some or none.
void ExpectCopyEnginesMoved(const CacheStats& stats, const Config& config, bool all_copied) {
  if (!all_copied) {
    EXPECT_LT(stats.copy_engine_fills, stats.all.inserted) << "some prefetches took the warps";
    if (config.passes > 1) {
      EXPECT_EQ(stats.copy_engine_fills, 0) << "several passes: the warps";
    }
    return;
  }
  EXPECT_EQ(stats.copy_engine_fills, stats.all.inserted) << "every new row by the copy engines";
}

// MappedFills::kCopyEngine: the host gathers a mapped home's new rows, the
// copy engines move them in (one pass, new rows within the staging) and
// the warps write the evicted rows home beside; several passes, or a
// staging smaller than the new rows, fall back to the warps. Every case as
// the CPU, row for row, and the statistics say which path each took.
TEST_P(CacheCudaTest, CopyEngineFillsMoveEveryRowLikeTheCpu) {
  constexpr int64_t kStagingRowBytes = 8 * 4 + 24;  // RunManyMisses' widest f32 row
  uint64_t seed = 300;
  for (const CachePolicy policy : {CachePolicy::kLru, CachePolicy::kLfu}) {
    for (const int passes : {1, 3}) {
      for (const int64_t staging_rows : {int64_t{1} << 20, int64_t{64}}) {
        Config config{policy, passes, DType::kF32, DType::kI64, /*sets=*/1024};
        config.home = HomeMemory::kMapped;
        config.mapped_fills = MappedFills::kCopyEngine;
        config.fill_threads = passes == 1 ? 4 : 1;
        config.staging_bytes = staging_rows * kStagingRowBytes;
        config.write_back = ++seed % 2 == 0 ? WriteBack::kDirtyRows : WriteBack::kEveryRow;
        SCOPED_TRACE(Describe(config));
        const CacheStats stats = RunManyMisses(config, seed, seed + 7);
        if (HasFailure()) return;
        EXPECT_GT(stats.all.evicted, 2 * 2048) << "more evictions than a tile";
        ExpectCopyEnginesMoved(stats, config, passes == 1 && staging_rows > 64);
      }
    }
  }
  // Other row types and widths, repeats and conflict misses.
  for (const DType dtype : {DType::kF16, DType::kBF16}) {
    Config config{CachePolicy::kLru, 1, dtype, DType::kI32};
    config.home = HomeMemory::kMapped;
    config.mapped_fills = MappedFills::kCopyEngine;
    config.fill_threads = 3;
    SCOPED_TRACE(Describe(config));
    Twin twin(engine(), SmallTables(), config);
    ++seed;
    RunPipeline(twin, Trace(seed), seed * 1000);
    if (HasFailure()) return;
    const CacheStats total = twin.gpu().TotalStats();
    EXPECT_GT(total.all.evicted, 0) << "the trace evicts";
    EXPECT_GT(total.copy_engine_fills, 0) << "some prefetches took the copy engines";
    const CacheStats last = twin.gpu().LastStepStats();
    EXPECT_LE(last.copy_engine_fills, last.all.inserted);
  }
}

// A row that one pass evicts and a later pass of the same prefetch misses
// and inserts elsewhere: with its fill deferred, it must come from where
// its write-back went (the staging, or home), not from its stale home row.
TEST_P(CacheCudaTest, ARowEvictedAndReinsertedInOnePrefetchMatchesCpu) {
  constexpr int64_t kStagingRowBytes = 16 * 4 + 24;
  for (const int64_t staging_rows : {int64_t{1} << 10, int64_t{3}, int64_t{0}}) {
    for (const WriteBack write_back : {WriteBack::kEveryRow, WriteBack::kDirtyRows}) {
      Config config{CachePolicy::kLru, /*passes=*/2, DType::kF32, DType::kI64, /*sets=*/1};
      config.home = HomeMemory::kMapped;
      config.staging_bytes = staging_rows * kStagingRowBytes;
      config.write_back = write_back;
      SCOPED_TRACE(Describe(config));
      Twin twin(engine(), SmallTables(), config);
      // Table 0's rows 100..131 fill the one set; pass 0 (rows 0..7) evicts
      // the oldest eight of them, which pass 1 (rows 100..107) inserts again.
      std::vector<int64_t> warm(32);
      std::iota(warm.begin(), warm.end(), 100);
      std::vector<int64_t> bag(16);
      std::iota(bag.begin(), bag.begin() + 8, 0);
      std::iota(bag.begin() + 8, bag.end(), 100);
      const int batch = twin.AddBatch(Bags{1, {bag, {}, {}}});
      twin.Seed(5);
      twin.Warm(warm);
      // A backward on every warmed row: all 32 dirty, so each eviction writes
      // its row back under either WriteBack; then their home rows change too.
      const int touch = twin.AddBatch(Bags{1, {warm, {}, {}}});
      twin.Prefetch(touch);
      twin.Relookup(touch);
      twin.Backward(touch, 7);
      twin.WriteHome(6);
      twin.Prefetch(batch);
      twin.ExpectSameLocations(batch, "prefetch");
      twin.ExpectSameState("prefetch");
      EXPECT_EQ(twin.gpu().LastStepStats().all.evicted, 16);
      EXPECT_EQ(twin.gpu().LastStepStats().all.inserted, 16);
      twin.Relookup(batch);
      twin.Flush();
      twin.ExpectSameState("flush");
    }
  }
}

TEST_P(CacheCudaTest, SeveralBatchesInFlightMatchCpu) {
  // Three batches in flight, no wait between pushes; compared at the end.
  for (int passes : {1, 6}) {
    Config config{CachePolicy::kLfu, passes, DType::kF16, DType::kI32, /*sets=*/2};
    // No backward here: with dirty rows only, its evictions write nothing.
    if (passes > 1) config.write_back = WriteBack::kDirtyRows;
    SCOPED_TRACE(Describe(config));
    Twin twin(engine(), SmallTables(), config);
    std::mt19937_64 rng(21 + passes);
    std::vector<int> ids;
    ids.reserve(8);
    for (int i = 0; i < 8; ++i)
      ids.push_back(twin.AddBatch(RandomBags(rng, SmallTables(), 6, 8, 0.7, 30)));
    twin.Seed(5);
    twin.Prefetch(ids[0]);
    twin.Prefetch(ids[1]);
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (i + 2 < ids.size()) twin.Prefetch(ids[i + 2]);
      EXPECT_EQ(twin.gpu().batches_in_flight(), std::min<int>(3, static_cast<int>(ids.size() - i)));
      twin.Relookup(ids[i]);
    }
    for (int id : ids) twin.ExpectSameLocations(id, "after the pipeline");
    twin.ExpectSameState("after the pipeline");
    EXPECT_EQ(twin.gpu().batches_in_flight(), 0);
    const CacheSnapshot snapshot = twin.gpu().Snapshot();
    EXPECT_TRUE(std::all_of(snapshot.locks.begin(), snapshot.locks.end(), [](int32_t lock) {
      return lock == 0;
    })) << "every lock released";
    if (config.write_back == WriteBack::kDirtyRows) {
      const CacheCounts all = twin.gpu().TotalStats().all;
      EXPECT_GT(all.evicted, 0);
      EXPECT_EQ(all.bytes_to_home, 0) << "no row was trained: none went home";
    }
  }
}

TEST_P(CacheCudaTest, WarmFlushAndResetMatchCpu) {
  for (CachePolicy policy : {CachePolicy::kLru, CachePolicy::kLfu}) {
    const Config config{policy, 1, DType::kF16, DType::kI64, /*sets=*/2};
    SCOPED_TRACE(Describe(config));
    Twin twin(engine(), SmallTables(), config);
    std::mt19937_64 rng(31);
    // 120 ids (repeats included) for 64 ways: some sets fill, later rows skip.
    std::vector<int64_t> hot(120);
    for (int64_t& row : hot) row = std::uniform_int_distribution<int64_t>(0, 1339)(rng);
    const int batch = twin.AddBatch(RandomBags(rng, SmallTables(), 8, 10, 0.8, 60));
    twin.Seed(3);
    twin.Warm(hot);
    twin.ExpectSameState("warm");
    twin.Prefetch(batch);
    twin.ExpectSameLocations(batch, "prefetch after warm");
    twin.ExpectSameState("prefetch after warm");
    twin.Relookup(batch);
    twin.WriteHome(4);
    twin.Flush();
    twin.ExpectSameState("flush");
    twin.Reset();
    twin.ExpectSameState("reset");
    twin.Warm(std::vector<int64_t>(hot.rbegin(), hot.rend()));  // at timestep 1 now
    twin.ExpectSameState("warm after reset");
    twin.Prefetch(batch);
    twin.ExpectSameLocations(batch, "prefetch after the second warm");
    twin.Relookup(batch);
    twin.ExpectSameState("relookup after the second warm");
  }
}

TEST_P(CacheCudaTest, AllHitPrefetchAfterWarmMissesNothing) {
  // 20000 indices over 400 rows, all warmed into 64 sets first.
  const ops::TbeTables tables({5000, 3000}, {16, 8});
  const Config config{CachePolicy::kLru, 1, DType::kF32, DType::kI32, /*sets=*/64};
  Twin twin(engine(), tables, config);
  std::mt19937_64 rng(41);
  std::vector<int64_t> rows;
  rows.reserve(400);
  for (int i = 0; i < 200; ++i)
    rows.push_back(std::uniform_int_distribution<int64_t>(0, 4999)(rng));
  for (int i = 0; i < 200; ++i)
    rows.push_back(std::uniform_int_distribution<int64_t>(0, 2999)(rng));
  Bags bags{500, {}};
  for (int t = 0; t < 2; ++t) {
    for (int b = 0; b < 500; ++b) {
      std::vector<int64_t> bag(20);
      for (int64_t& row : bag)
        row = rows[t * 200 + std::uniform_int_distribution<int>(0, 199)(rng)];
      bags.bags.push_back(std::move(bag));
    }
  }
  std::vector<int64_t> linear;
  linear.reserve(400);
  for (int i = 0; i < 400; ++i) linear.push_back(rows[i] + (i < 200 ? 0 : 5000));
  const int batch = twin.AddBatch(bags);
  twin.Seed(9);
  twin.Warm(linear);
  twin.Prefetch(batch);
  twin.ExpectSameLocations(batch, "all-hit prefetch");
  twin.ExpectSameState("all-hit prefetch");
  const CacheStats stats = twin.gpu().LastStepStats();
  EXPECT_EQ(stats.all.requested, 20000);
  EXPECT_EQ(stats.all.unique,
            static_cast<int64_t>(std::set<int64_t>(linear.begin(), linear.end()).size()));
  EXPECT_EQ(stats.all.unique_misses, 0);
  EXPECT_EQ(stats.all.inserted, 0);
  const Where where = ReadWhere(twin.gpu_where(batch), twin.size(batch));
  EXPECT_TRUE(std::all_of(where.slot_of.begin(), where.slot_of.end(),
                          [](int32_t slot) { return slot >= 0; }));
  twin.Relookup(batch);
  twin.ExpectSameState("relookup");
}

// The InvalidArgument message a step's op fails with, at the wait on its
// locations.
std::string ErrorAtWait(engine::Engine& engine, const CacheLocations& where) {
  try {
    engine.WaitForVar(where.tensor().var());
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InvalidArgument on " << where.tensor().ctx().ToString();
  return {};
}

TEST_P(CacheCudaTest, ABadBatchFailsWithTheCpuMessageAndChangesNothing) {
  for (const MappedFills fills : {MappedFills::kWarps, MappedFills::kCopyEngine}) {
    Config config{CachePolicy::kLfu, 1, DType::kF32, DType::kI64, /*sets=*/2};
    if (fills == MappedFills::kCopyEngine) {
      config.home = HomeMemory::kMapped;
      config.mapped_fills = fills;
    }
    SCOPED_TRACE(Describe(config));
    ExpectABadBatchChangesNothing(config);
    if (HasFailure()) return;
  }
}

void CacheCudaTest::ExpectABadBatchChangesNothing(const Config& config) {
  Twin twin(engine(), SmallTables(), config);
  std::mt19937_64 rng(61);
  const int good = twin.AddBatch(RandomBags(rng, SmallTables(), 4, 6, 0.5, 30));
  // Table 1 (40 rows), bag 0 holds 4 and 500; then decreasing offsets.
  Bags bad_index{1, {{1}, {4, 500}, {7}}};
  const int bad = twin.AddBatch(bad_index);
  twin.Seed(8);
  twin.Prefetch(good);
  twin.Relookup(good);
  twin.ExpectSameState("before the bad batches");
  const CacheSnapshot before = twin.gpu().Snapshot();
  const CacheStats step_before = twin.gpu().LastStepStats();
  const CacheStats total_before = twin.gpu().TotalStats();
  const Where where_before = ReadWhere(twin.gpu_where(bad), twin.size(bad));

  twin.Prefetch(bad);
  const std::string cpu_error = ErrorAtWait(engine(), twin.cpu_where(bad));
  const std::string gpu_error = ErrorAtWait(engine(), twin.gpu_where(bad));
  EXPECT_THAT(cpu_error, HasSubstr("[CachedTbe::Prefetch] table 1, bag 0: index 500 is out of "
                                   "range [0, 40) (indices[2])"));
  EXPECT_EQ(gpu_error, cpu_error);

  std::vector<Batch> bad_offsets;
  for (Context ctx : {Context::CPU(), Context::GPU(0)}) {
    bad_offsets.push_back(RawBatch(engine(), ctx, {1, 2, 3, 4}, {0, 3, 1, 4}, 1, DType::kI32));
  }
  twin.cpu().Prefetch(bad_offsets[0].view(), twin.cpu_where(bad));
  twin.gpu().Prefetch(bad_offsets[1].view(), twin.gpu_where(bad));
  const std::string cpu_offsets = ErrorAtWait(engine(), twin.cpu_where(bad));
  EXPECT_THAT(cpu_offsets, HasSubstr("offsets[2] is 1, below offsets[1] = 3"));
  EXPECT_EQ(ErrorAtWait(engine(), twin.gpu_where(bad)), cpu_offsets);

  const CacheSnapshot after = twin.gpu().Snapshot();
  EXPECT_EQ(after.tags, before.tags);
  EXPECT_EQ(after.timestamps, before.timestamps);
  EXPECT_EQ(after.locks, before.locks);
  ExpectSameStats(step_before, twin.gpu().LastStepStats(), "this step's, unchanged");
  ExpectSameStats(total_before, twin.gpu().TotalStats(), "totals, unchanged");
  const Where where_after = ReadWhere(twin.gpu_where(bad), twin.size(bad));
  EXPECT_EQ(where_after.slot_of, where_before.slot_of) << "locations unchanged";
  EXPECT_EQ(where_after.num_locked, where_before.num_locked);
  twin.ExpectSameState("after the bad batches");
  // The refused prefetches hold nothing: no batch is in flight, on either.
  EXPECT_EQ(twin.gpu().batches_in_flight(), 0);
  EXPECT_EQ(twin.cpu().batches_in_flight(), 0);

  // Inference checks its batch too.
  twin.Lookup(bad);
  const std::string cpu_lookup = ErrorAtWait(engine(), twin.cpu_where(bad));
  EXPECT_THAT(cpu_lookup, HasSubstr("[CachedTbe::LookupForInference] table 1, bag 0: index 500"));
  EXPECT_EQ(ErrorAtWait(engine(), twin.gpu_where(bad)), cpu_lookup);

  // The cache goes on as before.
  twin.Prefetch(good);
  twin.ExpectSameLocations(good, "prefetch after the bad batches");
  twin.Relookup(good);
  twin.Lookup(good);
  twin.ExpectSameLocations(good, "lookup for inference");
  twin.ExpectSameState("after a good batch again");
}

// A managed home larger than the GPU's free memory is refused when the
// cache is made (it could hang the GPU), naming the mapped home instead.
TEST_P(CacheCudaTest, AManagedHomeBeyondTheGpusFreeMemoryIsRefused) {
  const std::size_t free = storage::DeviceFreeBytes(0);
  constexpr std::size_t kRowBytes = std::size_t{128} * 4;  // two tables of such rows hold it all
  const auto rows = static_cast<int64_t>((free + (std::size_t{1} << 30)) / (2 * kRowBytes)) + 1;
  CacheOptions options;
  options.ctx = Context::GPU(0);
  options.home = HomeMemory::kManaged;
  options.cache_bytes = int64_t{64} << 20;
  EXPECT_THAT(
      [&] {
        CachedTbe tbe(engine(), ops::TbeTables({rows, rows}, {128, 128}), options);
      },
      ::testing::ThrowsMessage<storage::OutOfMemory>(
          ::testing::AllOf(HasSubstr("refusing cudaMallocManaged"), HasSubstr("bytes free"),
                           HasSubstr("HomeMemory::kMapped"))));
}

TEST_P(CacheCudaTest, ControlTheComparisonSeesOneChangedByte) {
  const Config config{CachePolicy::kLru, 1, DType::kF16, DType::kI64, /*sets=*/2};
  Twin twin(engine(), SmallTables(), config);
  std::mt19937_64 rng(71);
  const int batch = twin.AddBatch(RandomBags(rng, SmallTables(), 4, 6, 0.5, 30));
  twin.Seed(2);
  twin.Prefetch(batch);
  twin.ExpectSameState("the same pushes");
  storage::Tensor& home = twin.gpu().home();
  home.WaitToWrite();
  static_cast<uint8_t*>(home.data())[home.bytes() / 2] ^= 1;
  EXPECT_NONFATAL_FAILURE(twin.ExpectSameState("one home byte flipped"), "home bytes: 1 of");
  twin.Relookup(batch);
  engine().WaitForAll();
}

// A report, not a check (run it with --gtest_also_run_disabled_tests): the
// GPU time of an all-hit prefetch against a cached forward of the same
// batch, at a DLRM-like shape (4 tables of 250k rows of dim 128, f32;
// B = 8192, pooling 20: 655k indices over 32k hot rows, all warmed).
TEST_P(CacheCudaTest, DISABLED_ReportAllHitPrefetchAgainstCachedForward) {
  constexpr int kTables = 4;
  constexpr int64_t kRows = 250000;
  constexpr int64_t kDim = 128;
  constexpr int64_t kBatch = 8192;
  constexpr int kPooling = 20;
  constexpr int64_t kHot = 8000;
  const ops::TbeTables tables(std::vector<int64_t>(kTables, kRows),
                              std::vector<int64_t>(kTables, kDim));
  CacheOptions options;
  options.ctx = Context::GPU(0);
  options.cache_bytes = int64_t{4096} * kWays * (kDim * 4 + 20);
  CachedTbe cache(engine(), tables, options);
  ops::RandomUniform(cache.home(), 1, -1.0f, 1.0f);
  std::mt19937_64 rng(5);
  std::vector<int64_t> hot;
  Bags bags{kBatch, {}};
  for (int t = 0; t < kTables; ++t) {
    std::vector<int64_t> rows(kHot);
    for (int64_t& row : rows) row = std::uniform_int_distribution<int64_t>(0, kRows - 1)(rng);
    for (int64_t row : rows) hot.push_back(t * kRows + row);
    for (int64_t b = 0; b < kBatch; ++b) {
      std::vector<int64_t> bag(kPooling);
      for (int64_t& row : bag) row = rows[std::uniform_int_distribution<int64_t>(0, kHot - 1)(rng)];
      bags.bags.push_back(std::move(bag));
    }
  }
  const Batch batch = ToBatch(engine(), Context::GPU(0), bags, DType::kI32);
  CacheLocations where = cache.NewLocations(NumIndices(bags));
  storage::Tensor out =
      storage::Tensor::Empty(engine(), {kBatch, tables.total_dim()}, DType::kF32, Context::GPU(0));
  cache.Warm(hot);
  cache.Prefetch(batch.view(), where);
  cache.Forward(batch.view(), where, out);
  cache.Relookup(batch.view(), where);
  engine().WaitForAll();
  ASSERT_EQ(cache.LastStepStats().all.unique_misses, 0) << "every row warmed";
  constexpr int kRounds = 50;
  auto time_us = [&](auto&& step) {
    step();
    engine().WaitForAll();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kRounds; ++i) step();
    engine().WaitForAll();
    const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
    return took.count() / kRounds;
  };
  // Prefetches alone: each into locations of its own (a batch in flight
  // holds its locations until its relookup), relooked up after the timing.
  std::vector<CacheLocations> ahead;
  for (int i = 0; i <= kRounds; ++i) ahead.push_back(cache.NewLocations(NumIndices(bags)));
  std::size_t next = 0;
  const double prefetch = time_us([&] { cache.Prefetch(batch.view(), ahead[next++]); });
  for (CacheLocations& locations : ahead) cache.Relookup(batch.view(), locations);
  const double pair = time_us([&] {
    cache.Prefetch(batch.view(), where);
    cache.Relookup(batch.view(), where);
  });
  cache.Prefetch(batch.view(), where);  // a forward reads slots its batch holds locked
  const double forward = time_us([&] { cache.Forward(batch.view(), where, out); });
  cache.Relookup(batch.view(), where);
  engine().WaitForAll();
  std::printf(
      "[ report ] %s, %lld indices: all-hit prefetch %.1f us, prefetch + relookup %.1f us, "
      "cached forward %.1f us\n",
      GetParam().c_str(), static_cast<long long>(NumIndices(bags)), prefetch, pair, forward);
}

INSTANTIATE_TEST_SUITE_P(PerDeviceEngines, CacheCudaTest,
                         ::testing::Values("ThreadedEnginePerDeviceAsync",
                                           "ThreadedEnginePerDevice"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace ember::cache::testing
