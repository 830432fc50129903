#include "tools/train/dist/kernel_loading.h"

#include <cstdlib>

#include <fmt/format.h>

#include "engine/error.h"

namespace ember::train {

void PreferEagerKernelLoading() { setenv("CUDA_MODULE_LOADING", "EAGER", /*overwrite=*/0); }

void CheckKernelLoading(int gpu_ranks, bool lazy) {
  if (gpu_ranks <= 1 || !lazy) return;
  throw Unavailable(fmt::format(
      "[TrainSharded] {} GPU ranks in one process need CUDA to load kernels eagerly, but it "
      "loads them lazily (CUDA_MODULE_LOADING=LAZY, CUDA's default): a kernel's first launch "
      "would wait for every GPU's queued work, an all-to-all among it that waits for another "
      "rank of this process, and the run would hang until the collective's timeout. Set "
      "CUDA_MODULE_LOADING=EAGER before the process starts (ember-train and ember-bench-dist "
      "do so for runs of several GPUs)",
      gpu_ranks));
}

}  // namespace ember::train
