// MIN with buckets by next use: a cached row sits in the bucket of the batch
// that next uses it (the last bucket: never), so the row to drop is in the
// highest non-empty bucket. Buckets hold stale entries (rows used or dropped
// since); an entry counts only while next_use_of says the row is there.

#include "tools/bench/cache/belady_sim.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"

namespace ember::bench::cache_bench {
namespace {

// next[t][j]: the first batch after t that uses trace[t][j], or `never`.
std::vector<std::vector<int32_t>> NextUses(const Trace& trace, int32_t never) {
  std::vector<std::vector<int32_t>> next(trace.size());
  absl::flat_hash_map<int64_t, int32_t> seen;  // row -> the earliest batch after t using it
  for (int32_t t = static_cast<int32_t>(trace.size()) - 1; t >= 0; --t) {
    next[t].reserve(trace[t].size());
    for (const int64_t row : trace[t]) {
      auto [it, inserted] = seen.try_emplace(row, t);
      next[t].push_back(inserted ? never : it->second);
      it->second = t;
    }
  }
  return next;
}

}  // namespace

std::vector<SimCounts> SimulateBelady(const Trace& trace, int64_t capacity) {
  const auto never = static_cast<int32_t>(trace.size());
  const std::vector<std::vector<int32_t>> next = NextUses(trace, never);
  std::vector<std::vector<int64_t>> buckets(trace.size() + 1);
  absl::flat_hash_map<int64_t, int32_t> next_use_of;  // cached row -> its bucket
  int32_t top = 0;                                    // no bucket above it holds an entry
  std::vector<SimCounts> counts(trace.size());
  for (std::size_t t = 0; t < trace.size(); ++t) {
    counts[t].unique = static_cast<int64_t>(trace[t].size());
    for (const int64_t row : trace[t]) counts[t].misses += next_use_of.contains(row) ? 0 : 1;
    for (std::size_t j = 0; j < trace[t].size(); ++j) {
      const int32_t use = next[t][j];
      next_use_of[trace[t][j]] = use;
      buckets[use].push_back(trace[t][j]);
      top = std::max(top, use);
    }
    while (static_cast<int64_t>(next_use_of.size()) > capacity) {
      while (buckets[top].empty()) --top;  // some bucket above t holds a cached row
      const int64_t row = buckets[top].back();
      buckets[top].pop_back();
      auto it = next_use_of.find(row);
      if (it != next_use_of.end() && it->second == top) next_use_of.erase(it);
    }
    std::vector<int64_t>().swap(buckets[t]);  // only stale entries are left there
  }
  return counts;
}

}  // namespace ember::bench::cache_bench
