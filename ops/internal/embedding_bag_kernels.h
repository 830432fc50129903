#pragma once

// The TBE kernels behind the push functions of embedding_bag.h, on TbeArgs.
// CPU kernels run to completion and throw InvalidArgument for bad indices or
// offsets (naming table, bag and value). CUDA kernels launch on `stream` (a
// cudaStream_t of GPU `device`, which is current) and return without
// waiting; a build without CUDA links stubs that throw Unavailable.
//
// Plain C++17 (the .cu files include it).
//
// Thread safety: reentrant (each call works on its own arguments).

#include <cstdint>

#include "ops/internal/embedding_bag_args.h"
#include "ops/internal/embedding_bag_fault.h"

namespace ember::storage {
class StorageManager;
}  // namespace ember::storage

namespace ember::ops::internal {

struct TbeBackwardPlan;  // tbe_plan.h

// The widest row TbeBackwardCuda takes: its reduce keeps a row's gradient
// in registers, 8 float4 a lane. The push functions refuse wider tables on
// a GPU (embedding_bag.cc), where the shapes are known.
inline constexpr int64_t kTbeBackwardCudaMaxDim = 1024;
// The most rows a table may have for TbeBackwardCuda: it sorts indices as
// 32-bit keys, 0xffffffff marking bad entries, so index 2^32 - 1 and above
// cannot be told from one. Refused at push time like wider rows.
inline constexpr int64_t kTbeBackwardCudaMaxRows = int64_t{0xffffffff};

void TbeForwardCpu(const TbeArgs& args);
void TbeBackwardCpu(const TbeArgs& args);

// Bad entries are skipped, never dereferenced.
void TbeForwardCuda(const TbeArgs& args, int device, void* stream);

// The backward with the host's `plan` (tbe_plan.h): one register shape,
// launched alone. Temporaries (sort buffers, partial sums) come from
// `memory`, the op's device manager, ordered on `stream` and released
// (fenced) before it returns. Bad entries are skipped; when `skip_if_bad`
// is set (validation), the whole batch is, so that a bad batch changes no
// weight or optimizer state (as on the CPU): it points to the device word
// where TbeFindFaultCuda, launched before on `stream`, leaves the first bad
// bag (kTbeNoBadBag when none).
void TbeBackwardCuda(const TbeArgs& args, const TbeBackwardPlan& plan,
                     const unsigned long long* skip_if_bad, storage::StorageManager& memory,
                     int device, void* stream);

// Where the check kernels leave their verdict on the device: the smallest
// bad bag g = t * B + b, then that bag's fault.
inline constexpr unsigned long long kTbeNoBadBag = ~0ull;
struct TbeFaultRecord {
  unsigned long long first_bad;  // kTbeNoBadBag: none
  TbeFault fault;                // kNone when first_bad is
};

// Launches on `stream` the check of args' batch: resets `record` (device
// memory), finds the first bad bag (embedding_bag_fault.h's order) and
// describes its fault as the CPU kernels would, then copies that fault
// into `host` (pinned host memory) asynchronously. Nothing waits; `host`
// holds the verdict once the stream has passed this work.
void TbeFindFaultCuda(const TbeArgs& args, TbeFaultRecord* record, TbeFault* host, int device,
                      void* stream);

}  // namespace ember::ops::internal
