#include "tools/bench/cache/lru_sim.h"

namespace ember::bench::cache_bench {

SimCounts LruSim::Step(std::span<const int64_t> rows) {
  const int64_t batch = batch_++;
  SimCounts counts;
  counts.unique = static_cast<int64_t>(rows.size());
  for (const int64_t row : rows) {
    auto [it, inserted] = last_use_.try_emplace(row, batch);
    if (inserted) {
      ++counts.misses;
    } else {
      it->second = batch;  // its older entry in order_ is now stale
    }
    order_.emplace_back(batch, row);
  }
  while (size() > capacity_) {
    const auto [used, row] = order_.front();
    order_.pop_front();
    auto it = last_use_.find(row);
    if (it != last_use_.end() && it->second == used) last_use_.erase(it);
  }
  return counts;
}

std::vector<SimCounts> SimulateLru(const Trace& trace, int64_t capacity) {
  LruSim lru(capacity);
  std::vector<SimCounts> counts;
  counts.reserve(trace.size());
  for (const std::vector<int64_t>& batch : trace) counts.push_back(lru.Step(batch));
  return counts;
}

}  // namespace ember::bench::cache_bench
