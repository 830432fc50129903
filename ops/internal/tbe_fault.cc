// TbeGpuValidation (tbe_fault.h): a fault record's use, and the deferred
// check that reads it.

#include "ops/internal/tbe_fault.h"

#include <exception>
#include <utility>

#include "engine/base/logging.h"
#include "engine/error.h"
#include "ops/internal/embedding_bag_fault.h"
#include "ops/internal/embedding_bag_kernels.h"

namespace ember::ops::internal {

TbeGpuValidation::TbeGpuValidation(const TbeArgs& args, int device, void* stream,
                                   storage::StorageManager& pinned_memory)
    : args_(args),
      stream_(stream),
      record_(TbeStreamFaultRecordCuda(device, stream)),
      host_(std::make_shared<storage::Buffer>(pinned_memory.Alloc(sizeof(TbeFault), stream))) {}

TbeGpuValidation::~TbeGpuValidation() {
  if (finished_) return;
  try {
    TbeResetFaultCuda(args_, record_, stream_);
  } catch (const std::exception& e) {
    // The op fails with its own error already; a failed reset leaves the
    // stream's record marked, which the next check on it would report.
    Log().error("[{}] the fault record was not reset: {}", TbeOpName(args_), e.what());
  }
}

void TbeGpuValidation::MarkBadBags() { TbeMarkBadBagsCuda(args_, first_bad(), stream_); }

unsigned long long* TbeGpuValidation::first_bad() const { return &record_->first_bad; }

engine::DeferredCheck TbeGpuValidation::Finish(const char* op) {
  TbeDescribeFaultCuda(args_, record_, static_cast<TbeFault*>(host_->data()), stream_);
  finished_ = true;
  return [host = host_, op]() -> std::exception_ptr {
    const TbeFault& fault = *static_cast<const TbeFault*>(host->data());
    if (fault.kind == TbeFaultKind::kNone) return nullptr;
    return std::make_exception_ptr(InvalidArgument(DescribeTbeFault(op, fault)));
  };
}

}  // namespace ember::ops::internal
