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
// Libraries that load their own kernels do so whatever the mode: cuBLAS at
// a GPU's first handle, with the same wait under the same lock. Seen on
// four H200s, once in 46 runs: an engine worker in cublasCreate
// (cuLibraryLoadData) beside three ranks' all-to-alls, the fourth rank's
// thread held back by the lock before it could issue its own. So they are
// loaded before any rank starts (LoadLibraryKernels).
//
// Thread safety: PreferEagerKernelLoading before any thread starts CUDA;
// CheckKernelLoading is thread-safe; LoadLibraryKernels before the ranks
// start.

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

// Loads the libraries' kernels (ops::LoadMatmulKernels) on GPUs 0 to
// gpus - 1, from the calling thread, which keeps its handles. Throws
// CudaError when CUDA or a library fails.
void LoadLibraryKernels(int gpus);

}  // namespace ember::train
