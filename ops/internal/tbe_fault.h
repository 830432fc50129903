#pragma once

// TbeGpuValidation: a TBE op's validation on the GPU that never stalls its
// worker (embedding_bag.h, "Validation").
//
// On the op's stream: bad bags are marked in the stream's fault record (in
// device memory, clean at the start of each op: embedding_bag_kernels.h),
// by MarkBadBags (a pass of its own, for a backward that must know before
// it updates anything) or by the op's own kernel as it reads (the forward:
// a compare per entry); Finish describes the first bad bag's fault as the
// CPU kernels would, straight into pinned host memory, resets the record,
// and returns the check to complete the op with
// (OnComplete::WithCheck): the engine runs it on the host once the op's
// GPU work is known done (at the first wait that covers it: WaitForVar on
// an output, a CPU op reading one, WaitForAll), and it returns the
// InvalidArgument the CPU kernels would throw, or null. Why: the check
// used to end with a stream sync on the worker, which idled the GPU
// between ops and held the worker for it.
//
// Memory. The device record is the stream's, kept by the worker thread
// for its life (no allocation or reset per op); the fault's pinned memory
// comes from the pinned manager (cudaHostAlloc
// memory, which the GPU writes directly under unified addressing), is
// shared with the check, and goes back when the engine drops the check,
// after reading it.
//
// Thread safety: used by the op's worker; the check may run on any thread.

#include <memory>

#include "engine/engine.h"
#include "ops/internal/embedding_bag_args.h"
#include "storage/buffer.h"
#include "storage/storage_manager.h"

namespace ember::ops::internal {

struct TbeFaultRecord;  // embedding_bag_kernels.h

class TbeGpuValidation {
 public:
  // The check of args' batch on `stream` of `device` (the current one).
  // Throws CudaError, OutOfMemory.
  TbeGpuValidation(const TbeArgs& args, int device, void* stream,
                   storage::StorageManager& pinned_memory);
  // Without Finish (an error on the way), resets the record on the stream.
  ~TbeGpuValidation();
  TbeGpuValidation(const TbeGpuValidation&) = delete;
  TbeGpuValidation& operator=(const TbeGpuValidation&) = delete;

  // Marks the first bad bag by a pass of its own.
  void MarkBadBags();

  // The first bad bag on the device (kTbeNoBadBag: none): marked there
  // (atomicMin) by a kernel that checks as it reads, or read by kernels
  // launched after MarkBadBags, while this object lives.
  [[nodiscard]] unsigned long long* first_bad() const;

  // After the marking: describes the first bad bag's fault and returns the
  // check to complete the op with, which reads it (the engine runs it only
  // once the stream has passed these launches). `op` (a literal) names the
  // op in the error.
  [[nodiscard]] engine::DeferredCheck Finish(const char* op);

 private:
  const TbeArgs& args_;  // the op's, which outlives this object
  void* stream_;
  TbeFaultRecord* record_;                 // the stream's (device memory)
  std::shared_ptr<storage::Buffer> host_;  // its TbeFault, pinned
  bool finished_ = false;
};

}  // namespace ember::ops::internal
