#include "tools/train/dist/kernel_loading.h"

#include <cstdlib>

#include <fmt/format.h>

#include "engine/error.h"
#include "ops/matmul.h"

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

void LoadLibraryKernels(int gpus) {
  for (int device = 0; device < gpus; ++device) ops::LoadMatmulKernels(device);
}

}  // namespace ember::train
