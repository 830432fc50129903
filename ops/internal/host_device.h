#pragma once

// EMBER_HOST_DEVICE marks the functions that both kernels of an op call: the
// CPU kernel (g++) and the CUDA kernel (nvcc, which needs them marked
// __host__ __device__). The one macro the dense ops use, so that their
// shared math is written once.

#if defined(__CUDACC__)
#define EMBER_HOST_DEVICE __host__ __device__
#else
#define EMBER_HOST_DEVICE
#endif
