#pragma once

// Kernel loading when one process drives several GPU ranks.
//
// Under CUDA's lazy loading (CUDA_MODULE_LOADING=LAZY, its default since
// 12.2), the first launch of a kernel loads its module, and the load waits
// for the GPUs' queued work to finish while it holds the driver's lock. In a
// process that drives several NCCL ranks, that queued work can be one
// rank's all-to-all, waiting for another rank whose next collective is
// issued by a thread that the same lock now holds back: the ranks wait for
// each other until the collective's timeout. Seen on two H100s in
// ember-bench-dist: rank 1's first embedding backward sat 60 s in its
// launch while its all-to-all waited for rank 0. Eager loading (every
// kernel loaded when CUDA starts) removes the wait.
//
// Thread safety: PreferEagerKernelLoading before any thread starts CUDA;
// CheckKernelLoading is thread-safe.

namespace ember::train {

// Sets CUDA_MODULE_LOADING=EAGER unless the environment names a mode
// already. Takes effect only before CUDA starts in this process: call it at
// the top of main (ember-train and ember-bench-dist do, for runs of several
// GPUs).
void PreferEagerKernelLoading();

// Throws Unavailable, naming the variable to set, when `gpu_ranks` (more
// than one) ranks of this process run on GPUs while kernels load lazily
// (`lazy`: CudaLoadsKernelsLazily()).
void CheckKernelLoading(int gpu_ranks, bool lazy);

}  // namespace ember::train
