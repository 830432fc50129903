#pragma once

// GpuCount: how many CUDA devices this process can use, for every layer: 0
// on a machine without a GPU or driver, and in a build without CUDA (whose
// GPU paths then report Unavailable instead of failing later).
//
// Thread safety: thread-safe.

namespace ember {

// The number of CUDA devices; 0 without CUDA, a driver or a device. Never
// throws.
int GpuCount();

// Whether CUDA loads this process's kernels lazily, each on its first
// launch (CUDA_MODULE_LOADING=LAZY, CUDA's default since 12.2), as the
// driver reports it; false without CUDA or a driver. Such a first launch
// waits for the GPUs' queued work to finish, which a process that drives
// several NCCL ranks must not do: that work may be a collective waiting
// for another of its ranks. Never throws.
bool CudaLoadsKernelsLazily();

}  // namespace ember
