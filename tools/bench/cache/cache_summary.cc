// The summary of ember-bench-cache (cache_cases.h): one row per figure a
// target checks, every target declared whether its case ran or not, so that
// the report says PASS, FAIL or "not run" for each. No CUDA here.

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tools/bench/cache/cache_cases.h"
#include "tools/bench/common/table_printer.h"

namespace ember::bench {

std::string CacheShape::Name() const {
  return absl::StrFormat("T=%d L=%d B=%d, %s rows x %d f32 per table, %s", tables, pooling, batch,
                         WithCommas(double(rows)), dim,
                         zipf > 0 ? absl::StrFormat("Zipf %g", zipf) : std::string("uniform"));
}

std::string TempPerIndexKey(int passes) { return absl::StrCat("temp_per_index_M", passes); }
std::string PassesTimeKey(int passes) { return absl::StrCat("time_M", passes, "_over_M1"); }

Table SummaryTable(const CacheBenchOptions& options) {
  Table table;
  table.title = "Cache targets: the figures the targets check";
  table.columns = {"measured"};
  table.target_column = "measured";
  table.targets_title = "Targets (H100; PASS, FAIL, or not run)";
  table.targets.emplace_back("prefetch of misses, % of H2D bandwidth", kPrefetchPctH2d, 80.0,
                             /*at_least=*/true);
  table.targets.emplace_back("all-hit prefetch / cached forward", kAllHitPrefetchOverForward, 1.0,
                             /*at_least=*/false);
  table.targets.emplace_back("cached forward, % of GPU TBE speed", kCachedForwardPct, 90.0,
                             /*at_least=*/true);
  for (int m : options.passes_list) {
    const double goal = m == 1 ? 50.0 : 50.0 / m + 4.0;
    table.targets.emplace_back(absl::StrFormat("prefetch temporaries per index, M=%d", m),
                               TempPerIndexKey(m), goal, /*at_least=*/false);
  }
  for (int m : options.passes_list) {
    if (m == 1) continue;
    table.targets.emplace_back(absl::StrFormat("prefetch time M=%d / M=1", m), PassesTimeKey(m),
                               1.2, /*at_least=*/false);
  }
  table.targets.emplace_back("hit rate - exact LRU (cache >= 1.5x U)", kHitGapWorst, -2.0,
                             /*at_least=*/true);
  return table;
}

}  // namespace ember::bench
