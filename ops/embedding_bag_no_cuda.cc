// The TBE CUDA entry points in a build without CUDA: every one throws
// Unavailable, so that callers carry no #if (no GPU context can run here).

#include "ops/internal/embedding_bag_kernels.h"
#include "ops/internal/embedding_bag_upload.h"
#include "ops/internal/op_util.h"
#include "ops/internal/tbe_device_tables.h"

namespace ember::ops::internal {

void TbeForwardCuda(const TbeArgs&, unsigned long long*, int, void*) {
  ThrowNoCuda("TbeForwardCuda");
}
void TbeBackwardCuda(const TbeArgs&, const TbeBackwardPlan&, const unsigned long long*,
                     storage::StorageManager&, int, void*) {
  ThrowNoCuda("TbeBackwardCuda");
}
void TbeResetFaultCuda(const TbeArgs&, TbeFaultRecord*, void*) { ThrowNoCuda("TbeResetFaultCuda"); }
void TbeMarkBadBagsCuda(const TbeArgs&, unsigned long long*, void*) {
  ThrowNoCuda("TbeMarkBadBagsCuda");
}
TbeFaultRecord* TbeStreamFaultRecordCuda(int, void*) { ThrowNoCuda("TbeStreamFaultRecordCuda"); }
void TbeDescribeFaultCuda(const TbeArgs&, TbeFaultRecord*, TbeFault*, void*) {
  ThrowNoCuda("TbeDescribeFaultCuda");
}
void TbeUploadCuda(const int64_t*, int64_t, int64_t*, int, void*) { ThrowNoCuda("TbeUploadCuda"); }

// Without CUDA a TbeDeviceTables never has a GPU copy.
struct TbeDeviceTables::DeviceCopy {};
void TbeDeviceTables::DeleteDeviceCopy::operator()(DeviceCopy* copy) const { delete copy; }
TbeDeviceTables::DeviceRead::DeviceRead(TbeDeviceTables& tables, TbeArgs&, int device, void* stream,
                                        storage::StorageManager&)
    : tables_(tables), device_(device), stream_(stream) {
  ThrowNoCuda("TbeDeviceTables::DeviceRead");
}
TbeDeviceTables::DeviceRead::~DeviceRead() {
  (void)tables_, (void)device_, (void)stream_;  // never made here; only the CUDA code reads them
}

}  // namespace ember::ops::internal
