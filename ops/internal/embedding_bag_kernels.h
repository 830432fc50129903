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
struct TbeFaultRecord;   // below

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

// Bad entries are skipped, never dereferenced. With `mark_bad` (validation)
// the forward also marks the first bad bag there as TbeMarkBadBagsCuda
// would (atomicMin), checking each offset and index as it reads it: the
// check costs a compare per entry and no pass of its own.
void TbeForwardCuda(const TbeArgs& args, unsigned long long* mark_bad, int device, void* stream);

// The backward with the host's `plan` (tbe_plan.h): one register shape,
// launched alone. Temporaries (sort buffers, partial sums) come from
// `memory`, the op's device manager, ordered on `stream` and released
// (fenced) before it returns. Bad entries are skipped; when `skip_if_bad`
// is set (validation), the whole batch is, so that a bad batch changes no
// weight or optimizer state (as on the CPU): it points to the device word
// where TbeMarkBadBagsCuda, launched before on `stream`, leaves the first bad
// bag (kTbeNoBadBag when none).
void TbeBackwardCuda(const TbeArgs& args, const TbeBackwardPlan& plan,
                     const unsigned long long* skip_if_bad, storage::StorageManager& memory,
                     int device, void* stream);

// Where the check kernels mark the first bad bag on the device: the
// smallest bad g = t * B + b.
inline constexpr unsigned long long kTbeNoBadBag = ~0ull;
struct TbeFaultRecord {
  unsigned long long first_bad;  // kTbeNoBadBag: none
};

// The check of args' batch, on `stream`: mark the first bad bag
// (embedding_bag_fault.h's order) in the stream's record by
// TbeMarkBadBagsCuda or by a kernel that checks as it reads, then describe
// its fault as the CPU kernels would into `host` (pinned host memory,
// written by the GPU) and reset the record for the stream's next op.
// Nothing waits; `host` holds the verdict (kind kNone: no fault) once the
// stream has passed this work.
//
// TbeStreamFaultRecordCuda: the record of `stream` (on `device`) for the
// calling thread, reset; made (and reset on the stream) at its first use.
// One record a stream and thread, kept for the thread's life: each use
// ends with the describing kernel's reset, in stream order, so the next
// op's marks start clean without a memset of their own. A use that ends
// without it (an error between marking and describing) must reset it
// (TbeResetFaultCuda).
TbeFaultRecord* TbeStreamFaultRecordCuda(int device, void* stream);
void TbeResetFaultCuda(const TbeArgs& args, TbeFaultRecord* record, void* stream);
void TbeMarkBadBagsCuda(const TbeArgs& args, unsigned long long* first_bad, void* stream);
void TbeDescribeFaultCuda(const TbeArgs& args, TbeFaultRecord* record, TbeFault* host,
                          void* stream);

}  // namespace ember::ops::internal
