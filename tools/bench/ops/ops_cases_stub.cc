// RunOpsCases of a build without CUDA (EMBER_WITH_CUDA off): every case
// needs a GPU, so the bench only says why it ran nothing.

#include "tools/bench/ops/ops_cases.h"

namespace ember::bench {

OpsCasesResult RunOpsCases(const OpsBenchOptions& /*options*/) {
  OpsCasesResult result;
  result.skipped = "ember-bench-ops needs CUDA: this build has none (EMBER_CUDA=OFF or no nvcc)";
  return result;
}

}  // namespace ember::bench
