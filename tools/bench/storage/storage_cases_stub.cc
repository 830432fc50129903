// RunStorageCases of a build without CUDA (EMBER_WITH_CUDA off): every case
// needs a GPU, so the bench only says why it ran nothing.

#include "tools/bench/storage/storage_cases.h"

namespace ember::bench {

StorageCasesResult RunStorageCases(const StorageBenchOptions& /*options*/) {
  StorageCasesResult result;
  result.table.title = "Storage (device memory)";
  result.skipped =
      "ember-bench-storage needs CUDA: this build has none (EMBER_CUDA=OFF or no nvcc)";
  return result;
}

}  // namespace ember::bench
