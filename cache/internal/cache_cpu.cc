// The cache's CPU kernels (cache_kernels.h): the reference the CUDA kernels
// match bit for bit, following the order of cache_args.h (invariant 4).

#include <algorithm>
#include <cstring>
#include <vector>

#include "cache/internal/cache_kernels.h"
#include "cache/internal/cache_rows.h"
#include "cache/internal/cache_rows_cpu.h"

namespace ember::cache::internal {
namespace {

// A pass's distinct rows, in increasing linear id.
std::vector<int64_t> DistinctRows(const std::vector<int64_t>& linear, int64_t begin, int64_t end) {
  std::vector<int64_t> rows(linear.begin() + begin, linear.begin() + end);
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

int64_t* Stat(const CacheArgs& cache, int64_t* stats, int table, StatField field) {
  return &stats[table * kStatFields + field];
}

// Adds `value` to a field of `table` and of the totals, this step's and
// since creation (nothing when statistics are off: null arrays).
void Count(const CacheArgs& cache, int table, StatField field, int64_t value) {
  if (cache.stats_step == nullptr) return;
  for (int64_t* stats : {cache.stats_step, cache.stats_total}) {
    *Stat(cache, stats, table, field) += value;
    *Stat(cache, stats, cache.num_tables, field) += value;
  }
}

// Writes the row of `slot` (cached) back to its home row unless the cache
// writes back only dirty rows and no backward updated it (invariant 5);
// clean after. Whether it wrote.
bool WriteBack(const CacheArgs& cache, int64_t slot) {
  if (!cache.write_back_every_row && cache.dirty[slot] == 0) return false;
  const int64_t row = cache.tags[slot];
  const int table = TableOf(cache, row);
  CopyRow(cache, SlotRow(cache, slot), HomeRow(cache, table, row), cache.dims[table]);
  cache.dirty[slot] = 0;
  return true;
}

// Takes the row out of `slot` (cached) for a fill: counted as evicted, and
// as bytes home when it was written back.
void Evict(const CacheArgs& cache, int64_t slot) {
  const int table = TableOf(cache, cache.tags[slot]);
  Count(cache, table, kEvicted, 1);
  if (WriteBack(cache, slot)) Count(cache, table, kBytesToHome, RowBytes(cache, table));
}

// The order in which the ways of a set are taken as victims (invariant 4):
// eligible ways only (unlocked, not used in this timestep).
std::vector<int64_t> Victims(const CacheArgs& cache, int64_t set, int64_t timestep) {
  std::vector<int64_t> victims;
  for (int w = 0; w < kWays; ++w) {
    const int64_t slot = set * kWays + w;
    if (cache.locks[slot] == 0 && cache.timestamps[slot] < timestep) victims.push_back(slot);
  }
  std::stable_sort(victims.begin(), victims.end(),
                   [&](int64_t a, int64_t b) { return VictimKey(cache, a) < VictimKey(cache, b); });
  return victims;
}

// The order in which a set's distinct missed rows (in increasing linear id)
// are offered the set's victims (invariant 4): LRU, as they come; LFU, the
// largest count first, ties in increasing linear id.
void OrderCandidates(const CacheArgs& cache, std::vector<int64_t>& rows) {
  if (cache.policy != Policy::kLfu) return;
  std::stable_sort(rows.begin(), rows.end(),
                   [&](int64_t a, int64_t b) { return cache.counts[a] > cache.counts[b]; });
}

// One pass over indices [begin, end): LFU's counts (every index), hits,
// misses and insertions.
void PrefetchPass(const CacheArgs& cache, const std::vector<int64_t>& linear, int64_t begin,
                  int64_t end, const LocationArgs& where, int64_t timestep) {
  for (int64_t k = begin; k < end; ++k) {
    Count(cache, TableOf(cache, linear[k]), kRequested, 1);
    // As FBGEMM's lfu_update_counts: every index of the batch, before the
    // misses are offered ways, so that a candidate's count includes it.
    if (cache.policy == Policy::kLfu) ++cache.counts[linear[k]];
  }
  std::vector<std::pair<int64_t, int64_t>> misses;  // (set, row)
  for (const int64_t row : DistinctRows(linear, begin, end)) {
    const int table = TableOf(cache, row);
    const int64_t slot = FindSlot(cache, row);
    if (slot >= 0) {
      if (cache.timestamps[slot] == timestep) continue;  // an earlier pass took it
      cache.timestamps[slot] = timestep;
      ++cache.locks[slot];
      where.locked[(*where.num_locked)++] = static_cast<int32_t>(slot);
      Count(cache, table, kUnique, 1);
      continue;
    }
    Count(cache, table, kUnique, 1);
    Count(cache, table, kUniqueMisses, 1);
    misses.push_back({SetOf(row, cache.num_sets), row});
  }
  std::sort(misses.begin(), misses.end());  // by set, then by row
  for (std::size_t i = 0; i < misses.size();) {
    const int64_t set = misses[i].first;
    const std::vector<int64_t> victims = Victims(cache, set, timestep);
    // The victims' keys before this set's inserts change them (LFU's
    // admission compares the r-th candidate with the r-th victim).
    std::vector<VictimOrder> victim_keys(victims.size());
    std::transform(victims.begin(), victims.end(), victim_keys.begin(),
                   [&](int64_t slot) { return VictimKey(cache, slot); });
    std::vector<int64_t> candidates;
    for (; i < misses.size() && misses[i].first == set; ++i) candidates.push_back(misses[i].second);
    OrderCandidates(cache, candidates);
    for (std::size_t r = 0; r < candidates.size(); ++r) {
      const int64_t row = candidates[r];
      const int table = TableOf(cache, row);
      // LFU admits a row only over a victim used no more often (an empty
      // way counts -1): FBGEMM's lfu_cache_insert_kernel. Candidates come
      // in decreasing count and victims in increasing count, so the rows
      // admitted are a prefix of the candidates.
      const bool admitted = r < victims.size() && (cache.policy != Policy::kLfu ||
                                                   victim_keys[r].count <= cache.counts[row]);
      if (!admitted) {
        Count(cache, table, kUniqueConflictMisses, 1);  // its indices: at the prefetch's end
        continue;
      }
      const int64_t slot = victims[r];
      if (cache.tags[slot] != kEmpty) Evict(cache, slot);
      CopyRow(cache, HomeRow(cache, table, row), SlotRow(cache, slot), cache.dims[table]);
      cache.dirty[slot] = 0;
      cache.tags[slot] = row;
      cache.timestamps[slot] = timestep;
      cache.locks[slot] = 1;
      where.locked[(*where.num_locked)++] = static_cast<int32_t>(slot);
      Count(cache, table, kInserted, 1);
      Count(cache, table, kBytesToCache, RowBytes(cache, table));
    }
  }
}

}  // namespace

void PrefetchCpu(const CacheArgs& cache, const BatchArgs& batch, const LocationArgs& where,
                 int64_t timestep, int passes) {
  const std::vector<int64_t> linear = Linearize(cache, batch, "CachedTbe::Prefetch");
  if (cache.stats_step != nullptr) {
    std::fill(cache.stats_step, cache.stats_step + int64_t{cache.num_tables + 1} * kStatFields, 0);
  }
  *where.num_locked = 0;
  const int64_t n = batch.num_indices;
  const int64_t chunk = passes <= 1 ? n : (n + passes - 1) / passes;
  for (int64_t begin = 0; begin < n; begin += std::max<int64_t>(chunk, 1)) {
    PrefetchPass(cache, linear, begin, std::min(n, begin + chunk), where, timestep);
  }
  // Every index's location once the passes are done: with LFU, a row that
  // one pass left at home may be admitted by a later pass (its count grew),
  // and then all its indices read its slot (a backward of the batch before,
  // relooked up after this prefetch, updates that slot, not the home row).
  // The indices left at home are the conflict misses' (FBGEMM counts them
  // after its populate, repeats included).
  for (int64_t k = 0; k < n; ++k) {
    const int64_t slot = FindSlot(cache, linear[k]);
    where.slot_of[k] = static_cast<int32_t>(std::max<int64_t>(kMiss, slot));
    if (slot < 0) Count(cache, TableOf(cache, linear[k]), kConflictMissIndices, 1);
  }
}

void RelookupCpu(const CacheArgs& cache, const BatchArgs& batch, const LocationArgs& where) {
  for (int64_t i = 0; i < *where.num_locked; ++i) --cache.locks[where.locked[i]];
  *where.num_locked = 0;
  const std::vector<int64_t> linear = Linearize(cache, batch, "CachedTbe::Relookup");
  for (int64_t k = 0; k < batch.num_indices; ++k) {
    where.slot_of[k] = static_cast<int32_t>(std::max<int64_t>(kMiss, FindSlot(cache, linear[k])));
  }
}

void LookupCpu(const CacheArgs& cache, const BatchArgs& batch, const LocationArgs& where) {
  const std::vector<int64_t> linear = Linearize(cache, batch, "CachedTbe::LookupForInference");
  *where.num_locked = 0;
  for (int64_t k = 0; k < batch.num_indices; ++k) {
    where.slot_of[k] = static_cast<int32_t>(std::max<int64_t>(kMiss, FindSlot(cache, linear[k])));
  }
}

void FlushCpu(const CacheArgs& cache) {
  const int64_t slots = cache.num_sets * kWays;
  for (int64_t slot = 0; slot < slots; ++slot) {
    if (cache.tags[slot] != kEmpty) WriteBack(cache, slot);
  }
}

void ResetCpu(const CacheArgs& cache) {
  const int64_t slots = cache.num_sets * kWays;
  std::fill(cache.tags, cache.tags + slots, kEmpty);
  std::fill(cache.timestamps, cache.timestamps + slots, int64_t{-1});
  std::fill(cache.locks, cache.locks + slots, 0);
  std::fill(cache.dirty, cache.dirty + slots, 0);
  // As FBGEMM's reset_cache_states: LFU's counts start again from zero.
  if (cache.counts != nullptr) std::fill(cache.counts, cache.counts + cache.total_rows, 0);
}

void WarmCpu(const CacheArgs& cache, const int64_t* rows, int64_t count, int64_t timestep) {
  for (int64_t i = 0; i < count; ++i) {
    const int64_t row = rows[i];
    if (FindSlot(cache, row) >= 0) continue;
    const std::vector<int64_t> victims = Victims(cache, SetOf(row, cache.num_sets), timestep);
    const auto empty = std::find_if(victims.begin(), victims.end(),
                                    [&](int64_t slot) { return cache.tags[slot] == kEmpty; });
    if (empty == victims.end()) continue;  // the set is full: warming evicts nothing
    const int table = TableOf(cache, row);
    CopyRow(cache, HomeRow(cache, table, row), SlotRow(cache, *empty), cache.dims[table]);
    cache.dirty[*empty] = 0;
    cache.tags[*empty] = row;
    cache.timestamps[*empty] = timestep;
  }
}

}  // namespace ember::cache::internal
