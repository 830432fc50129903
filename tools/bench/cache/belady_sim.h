#pragma once

// Belady's optimum (MIN) at batch granularity: the ceiling of any cache of
// `capacity` rows on a trace, given the whole trace in advance. Per batch
// (its distinct rows): a miss is a row not cached; then, of the rows cached
// and the batch's rows (counted as just used), the cache keeps the
// `capacity` rows whose next use is soonest and drops the rest (a row used
// never again first). Keeping is optional, so a batch's own rows may be
// dropped at once. Within a batch the order of lookups does not matter, so
// this is MIN on the trace with each batch's rows in any order, which no
// cache of `capacity` rows can beat.
//
// Thread safety: a pure function.

#include <cstdint>
#include <vector>

#include "tools/bench/cache/lru_sim.h"
#include "tools/bench/cache/zipf_trace.h"

namespace ember::bench::cache_bench {

// Per batch of `trace`, what MIN of `capacity` rows counts. REQUIRES: no
// batch repeats a row; fewer than 2^31 batches.
[[nodiscard]] std::vector<SimCounts> SimulateBelady(const Trace& trace, int64_t capacity);

}  // namespace ember::bench::cache_bench
