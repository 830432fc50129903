// PooledExchange's kernels in a build without CUDA: the CPU path never
// calls them; a GPU context cannot exist there.

#include "engine/error.h"
#include "tools/train/dist/pooled_exchange_kernels.h"

namespace ember::train {

void LaunchUnpackPooled(const DeviceColumnPlan&, const float*, float*, void*) {
  throw Unavailable("[PooledExchange::Unpack] this build of Ember has no CUDA");
}

void LaunchPackGrads(const DeviceColumnPlan&, const float*, float*, void*) {
  throw Unavailable("[PooledExchange::PackGrads] this build of Ember has no CUDA");
}

}  // namespace ember::train
