#pragma once

// The TBE kernels behind the push functions of embedding_bag.h, on TbeArgs.
// CPU kernels run to completion and throw InvalidArgument for bad indices or
// offsets (naming table, bag and value). CUDA kernels launch on `stream` (a
// cudaStream_t) and return; a build without CUDA links stubs that throw
// Unavailable.
//
// Thread safety: reentrant (each call works on its own arguments).

#include <cstdint>

#include "ops/internal/embedding_bag_args.h"

namespace ember::ops::internal {

// The widest row TbeBackwardCuda takes: its reduce keeps a row's gradient
// in registers, 8 float4 a lane. The push functions refuse wider tables on
// a GPU (embedding_bag.cc), where the shapes are known; the kernels see
// them only in device memory.
inline constexpr int64_t kTbeBackwardCudaMaxDim = 1024;
// The most rows a table may have for TbeBackwardCuda: it sorts indices as
// 32-bit keys, 0xffffffff marking bad entries, so index 2^32 - 1 and above
// cannot be told from one. Refused at push time like wider rows.
inline constexpr int64_t kTbeBackwardCudaMaxRows = int64_t{0xffffffff};

void TbeForwardCpu(const TbeArgs& args);
void TbeBackwardCpu(const TbeArgs& args);

// Checks indices and offsets on the GPU and waits for the verdict (a stream
// sync); throws InvalidArgument like the CPU kernels. `device` is the
// stream's GPU.
void TbeValidateCuda(const TbeArgs& args, int device, void* stream);
// Bad entries are skipped, never dereferenced.
void TbeForwardCuda(const TbeArgs& args, int device, void* stream);
// Temporary memory (sort buffers) comes from the device's storage manager,
// ordered on `stream`.
void TbeBackwardCuda(const TbeArgs& args, int device, void* stream);

}  // namespace ember::ops::internal
