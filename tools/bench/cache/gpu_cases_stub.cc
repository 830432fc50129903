// RunGpuCases of a build without CUDA (EMBER_WITH_CUDA off): the GPU cases
// cannot run, and the bench runs the hit-rate case on the CPU cache.

#include "tools/bench/cache/cache_cases.h"

namespace ember::bench {

bool RunGpuCases(const CacheBenchOptions& /*options*/, engine::Engine& /*engine*/,
                 CacheCasesResult* /*result*/, std::string* why) {
  *why = "this build has no CUDA (EMBER_CUDA=OFF or no nvcc)";
  return false;
}

}  // namespace ember::bench
