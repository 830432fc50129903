// TbeGpuValidation (tbe_fault.h): the memory of a fault record, and the
// deferred check that reads it.

#include "ops/internal/tbe_fault.h"

#include <exception>
#include <utility>

#include "engine/error.h"
#include "ops/internal/embedding_bag_fault.h"
#include "ops/internal/embedding_bag_kernels.h"

namespace ember::ops::internal {

TbeGpuValidation::TbeGpuValidation(const TbeArgs& args, void* stream,
                                   storage::StorageManager& device_memory,
                                   storage::StorageManager& pinned_memory)
    : args_(args),
      stream_(stream),
      device_(device_memory.Alloc(sizeof(TbeFaultRecord), stream)),
      host_(std::make_shared<storage::Buffer>(pinned_memory.Alloc(sizeof(TbeFault), stream))) {
  TbeResetFaultCuda(args_, record(), stream_);
}

TbeFaultRecord* TbeGpuValidation::record() const {
  return static_cast<TbeFaultRecord*>(device_.data());
}

void TbeGpuValidation::MarkBadBags() { TbeMarkBadBagsCuda(args_, first_bad(), stream_); }

unsigned long long* TbeGpuValidation::first_bad() const { return &record()->first_bad; }

engine::DeferredCheck TbeGpuValidation::Finish(const char* op) {
  TbeDescribeFaultCuda(args_, record(), static_cast<TbeFault*>(host_->data()), stream_);
  return [host = host_, op]() -> std::exception_ptr {
    const TbeFault& fault = *static_cast<const TbeFault*>(host->data());
    if (fault.kind == TbeFaultKind::kNone) return nullptr;
    return std::make_exception_ptr(InvalidArgument(DescribeTbeFault(op, fault)));
  };
}

}  // namespace ember::ops::internal
