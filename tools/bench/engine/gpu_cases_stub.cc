// RunGpuCases of a build without CUDA (EMBER_WITH_CUDA off): nothing to run,
// so the report says so instead of the bench carrying an #if.

#include "tools/bench/engine/gpu_cases.h"

#include <cstdio>

namespace ember::bench {

GpuCasesResult RunGpuCases(const GpuBenchOptions& /*options*/) {
  constexpr char kWhy[] = "GPU cases skipped: this build has no CUDA (EMBER_CUDA=OFF or no nvcc)";
  std::fprintf(stderr, "[ember-bench-engine] %s\n", kWhy);
  GpuCasesResult result;
  result.table.title = "Engine (GPU)";
  result.table.notes.push_back(kWhy);
  return result;
}

}  // namespace ember::bench
