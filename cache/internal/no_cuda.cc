// The cache's CUDA kernels in a build without CUDA: no GPU cache can exist
// there (its context is checked against the engine's GPUs), so only a bug
// or a misuse gets here.

#include <string_view>

#include <fmt/format.h>

#include "cache/internal/cache_kernels.h"
#include "engine/error.h"

namespace ember::cache::internal {
namespace {

[[noreturn]] void NoCuda(std::string_view what) {
  throw Unavailable(fmt::format("[{}] a GPU cache needs CUDA; this build has none", what));
}

}  // namespace

void PrefetchCuda(const CacheArgs&, const BatchArgs&, const LocationArgs&, int64_t, int, void*,
                  int64_t, BatchFault*, int, void*) {
  NoCuda("CachedTbe::Prefetch");
}
void RelookupCuda(const CacheArgs&, const BatchArgs&, const LocationArgs&, int, void*) {
  NoCuda("CachedTbe::Relookup");
}
void LookupCuda(const CacheArgs&, const BatchArgs&, const LocationArgs&, BatchFault*, int, void*) {
  NoCuda("CachedTbe::LookupForInference");
}
void FlushCuda(const CacheArgs&, int, void*) { NoCuda("CachedTbe::Flush"); }
void ResetCuda(const CacheArgs&, int, void*) { NoCuda("CachedTbe::Reset"); }
void WarmCuda(const CacheArgs&, const int64_t*, int64_t, int64_t, int, void*) {
  NoCuda("CachedTbe::Warm");
}
void InitializeCuda(const CacheArgs&, const int64_t*, int64_t, int64_t*, int64_t*, int64_t, int,
                    void*) {
  NoCuda("CachedTbe");
}
void ZeroCuda(int64_t*, int64_t, int, void*) { NoCuda("CachedTbe::NewLocations"); }
bool HomeIsMappedCuda(const void*, int) { NoCuda("CachedTbe"); }
void ReadDeviceCuda(const void*, void*, int64_t, int) { NoCuda("CachedTbe::Stats"); }

}  // namespace ember::cache::internal
