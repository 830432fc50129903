#pragma once

// TbeGpuValidation: a TBE op's validation on the GPU that never stalls its
// worker (embedding_bag.h, "Validation").
//
// On the op's stream, TbeFindFaultCuda resets a fault record in device
// memory, finds the batch's first bad bag and describes its fault as the
// CPU kernels would, and copies that fault into pinned host memory. The op
// completes through OnComplete::WithCheck(Check(op)): the engine runs the
// check on the host once the op's GPU work is known done (at the first
// wait that covers it: WaitForVar on an output, a CPU op reading one,
// WaitForAll), and it returns the InvalidArgument the CPU kernels would
// throw, or null. Why: the check used to end with a stream sync on the
// worker, which idled the GPU between ops and held the worker for it.
//
// Memory. The device record comes from the op's device manager and goes
// back with this object (fenced after the launches on the stream); the
// pinned copy comes from the pinned manager, is shared with the check, and
// goes back when the engine drops the check, after reading it.
//
// Thread safety: used by the op's worker; the check may run on any thread.

#include <memory>

#include "engine/engine.h"
#include "ops/internal/embedding_bag_args.h"
#include "storage/buffer.h"
#include "storage/storage_manager.h"

namespace ember::ops::internal {

class TbeGpuValidation {
 public:
  // Launches the check of args' batch (device pointers) on `stream`, of
  // `device`, which is current. Throws CudaError, OutOfMemory.
  TbeGpuValidation(const TbeArgs& args, int device, void* stream,
                   storage::StorageManager& device_memory, storage::StorageManager& pinned_memory);
  TbeGpuValidation(const TbeGpuValidation&) = delete;
  TbeGpuValidation& operator=(const TbeGpuValidation&) = delete;

  // The first bad bag on the device (kTbeNoBadBag: none), for kernels
  // launched after the check on the stream, while this object lives.
  [[nodiscard]] const unsigned long long* first_bad() const;

  // The check to complete the op with; `op` (a literal) names it in the
  // error. Reads the pinned copy: run it only once the stream has passed
  // the launches (the engine does).
  [[nodiscard]] engine::DeferredCheck Check(const char* op) const;

 private:
  storage::Buffer device_;                 // a TbeFaultRecord
  std::shared_ptr<storage::Buffer> host_;  // its TbeFault, pinned
};

}  // namespace ember::ops::internal
