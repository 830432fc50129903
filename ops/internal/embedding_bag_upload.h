#pragma once

// How TbeTables' per-table arrays reach a GPU (TbeArgs points to device
// memory there): TbeDeviceTables (tbe_device_tables.h) copies its packed
// int64 array (5T + 3 values) once per device, with this function, into a
// device buffer allocated on the first op's stream.
//
// The copy travels as kernel parameters of a small store kernel rather than
// as a cudaMemcpyAsync: parameters are captured when the launch is
// enqueued, so nothing waits on the host (a pageable cudaMemcpyAsync may
// synchronize the stream; a pinned one needs its buffer fenced until the
// copy runs), and stream order puts the values in place before the op's
// kernels read them.
//
// Thread safety: reentrant.

#include <cstdint>

namespace ember::ops::internal {

// Enqueues on `stream` (a cudaStream_t of GPU `device`) the copy of `count`
// values from the host array `values` into device memory `dst`; returns
// without waiting (`values` may be freed at once). Throws CudaError;
// Unavailable in a build without CUDA.
void TbeUploadCuda(const int64_t* values, int64_t count, int64_t* dst, int device, void* stream);

}  // namespace ember::ops::internal
