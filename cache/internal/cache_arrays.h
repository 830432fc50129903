#pragma once

// Where a CachedTbe's arrays sit in its tensors, and the ops that set them
// up and read them back: the CacheArgs of cache_args.h built from tensors.
//
//   tables meta (i64): rows (T), dims (T), row offsets (T + 1), weight
//                      offsets (T + 1)
//   state (i64):       tags (S), timestamps (S), locks (S i32, S / 2 i64),
//                      this step's statistics, the totals ((T + 1) x F each),
//                      a GPU step's tallies (kStatTallies x T x F)
//   dirty (i32):       a flag per slot (S)
//   locations (i32):   slot per index (C), locked slots (C), their count (i64)
//   staging (i64):     R rows of a slot's bytes (rounded up to i64), then
//                      linear ids (R, twice), staging rows (R u32, twice),
//                      and an evicted row per slot (S)
//
// Thread safety: functions of their arguments; PushInitialize pushes.

#include <cstdint>
#include <memory>
#include <vector>

#include "cache/cache_options.h"
#include "cache/cache_stats.h"
#include "cache/internal/cache_args.h"
#include "engine/engine.h"
#include "ops/embedding_bag.h"
#include "storage/tensor.h"

namespace ember::cache::internal {

int64_t StateElements(int64_t num_slots, int num_tables);
int64_t TableArrayElements(const ops::TbeTables& tables);
// The tables meta's values, in the order above.
std::vector<int64_t> TableArrays(const ops::TbeTables& tables);

// Points `args`' per-table arrays into `base`, laid out as TableArrays.
void PointAtTableArrays(const int64_t* base, int num_tables, CacheArgs* args);

CacheArgs MakeCacheArgs(const ops::TbeTables& tables, const CacheOptions& options, int64_t num_sets,
                        int64_t slot_dim, const storage::Tensor& home, const storage::Tensor& slots,
                        const storage::Tensor& state, const storage::Tensor& dirty,
                        const storage::Tensor& counts, const storage::Tensor& meta);

// The staging rows that `staging_bytes` hold for slots of `slot_row_bytes`
// (0: none), and the i64 elements of R of them with the per-slot part.
int64_t StagingRows(int64_t staging_bytes, int64_t slot_row_bytes);
int64_t StagingElements(int64_t rows, int64_t slot_row_bytes, int64_t num_slots);
// Points `args` at a staging tensor of `rows` rows (see the layout).
void SetStaging(const storage::Tensor& staging, int64_t rows, int64_t slot_row_bytes,
                CacheArgs* args);

// A batch's locations in its tensor of `capacity` (see the layout).
LocationArgs LocationsIn(const storage::Tensor& locations, int64_t capacity);

// Pushes the op that fills the tables meta, empties every slot and zeroes
// the statistics (and LFU counts): it writes meta, state, dirty and counts.
void PushInitialize(engine::Engine& engine, const ops::TbeTables& tables,
                    std::shared_ptr<const CacheArgs> args, const storage::Tensor& meta,
                    const storage::Tensor& state, const storage::Tensor& dirty,
                    const storage::Tensor& counts);

// The statistics (T + 1 rows of kStatFields): this step's, or the totals.
// REQUIRES: the ops writing the state have finished (a WaitForVar).
std::vector<int64_t> ReadStats(const CacheArgs& cache, bool total);
// Every slot's tag, timestamp, lock count and dirty flag, the same way
// (after waits for the state and dirty vars).
CacheSnapshot ReadSnapshot(const CacheArgs& cache);

}  // namespace ember::cache::internal
