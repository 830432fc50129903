#pragma once

// LruSim: an exact, fully associative LRU cache of `capacity` rows at batch
// granularity, the reference ember-bench-cache holds the set-associative
// cache's hit rate against. Per batch (its distinct rows): a miss is a row
// not cached; then every row of the batch becomes the most recent (rows
// missing are inserted) and the least recent rows beyond the capacity are
// evicted. Rows of one batch are equally recent; among them the earlier in
// the batch's order goes first, which matters only for a batch of more
// distinct rows than the capacity (it keeps its last `capacity` rows).
//
// Thread safety: none; one thread steps a simulator.

#include <cstdint>
#include <deque>
#include <span>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "tools/bench/cache/zipf_trace.h"

namespace ember::bench::cache_bench {

// What a simulator (or the cache) counted over one or more batches.
struct SimCounts {
  int64_t unique = 0;  // distinct rows looked up, summed over batches
  int64_t misses = 0;  // of those, not cached when looked up

  // 1 - misses / unique (1 with no rows).
  [[nodiscard]] double hit_rate() const {
    return unique == 0 ? 1.0 : 1.0 - static_cast<double>(misses) / static_cast<double>(unique);
  }
  SimCounts& operator+=(const SimCounts& other) {
    unique += other.unique;
    misses += other.misses;
    return *this;
  }
};

class LruSim {
 public:
  // REQUIRES: capacity >= 0.
  explicit LruSim(int64_t capacity) : capacity_(capacity) {}

  // One batch. REQUIRES: `rows` has no repeats.
  SimCounts Step(std::span<const int64_t> rows);

  // Rows cached now.
  [[nodiscard]] int64_t size() const { return static_cast<int64_t>(last_use_.size()); }
  [[nodiscard]] bool Contains(int64_t row) const { return last_use_.contains(row); }

 private:
  int64_t capacity_;
  int64_t batch_ = 0;                               // batches stepped so far
  absl::flat_hash_map<int64_t, int64_t> last_use_;  // cached row -> the batch that last used it
  // (batch, row) in use order, oldest first; an entry is stale once its row
  // was used again (or evicted), and is dropped when it reaches the front.
  std::deque<std::pair<int64_t, int64_t>> order_;
};

// Per batch of `trace`, what an LruSim of `capacity` counts.
[[nodiscard]] std::vector<SimCounts> SimulateLru(const Trace& trace, int64_t capacity);

}  // namespace ember::bench::cache_bench
