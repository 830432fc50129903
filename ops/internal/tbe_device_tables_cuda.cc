// TbeDeviceTables' GPU copies (tbe_device_tables.h): one per GPU, made by
// the first op that reads it there, released after every op's read, and
// never a host wait.

#include <memory>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>

#include "engine/cuda/check.h"
#include "engine/cuda/handles.h"
#include "engine/cuda/scoped_device.h"
#include "ops/internal/embedding_bag_upload.h"
#include "ops/internal/tbe_device_tables.h"
#include "storage/buffer.h"
#include "storage/storage_manager.h"

namespace ember::ops::internal {

// Members in destruction order bottom-up: the buffer goes first (fenced on
// `own`), then the events, then `own` (whose pending work CUDA finishes
// after the handle is destroyed).
struct TbeDeviceTables::DeviceCopy {
  // The last read of an op stream: recorded after each op's kernels.
  struct StreamRead {
    void* stream;
    CudaEvent event;
  };

  explicit DeviceCopy(int device) {
    ScopedDevice on(device);  // streams and events belong to the current device
    own = CudaStream::Create("cudaStreamCreate (TBE tables)");
    uploaded = CudaEvent::Create("cudaEventCreate (TBE tables upload)");
  }

  // Releases the copy once every op stream passed its last read: `own`
  // waits for their events, and the buffer is fenced on `own`.
  ~DeviceCopy() {
    for (const StreamRead& read : reads) {
      if (!CudaLogIfError(cudaStreamWaitEvent(own.get(), read.event.get(), 0),
                          "cudaStreamWaitEvent (TBE tables release)")) {
        // Unfenced, the memory could be handed out under a kernel still
        // reading it: leaking it is the lesser harm.
        (void)new storage::Buffer(std::move(buffer));
        return;
      }
    }
    buffer.Reset();
  }

  CudaStream own;      // the upload, and the release's fence
  CudaEvent uploaded;  // recorded on `own` after the upload
  // The GPU has passed `uploaded`, so no stream needs to wait for it. Until
  // then every op stream waits (cudaStreamWaitEvent) before its kernels.
  bool passed = false;
  std::vector<StreamRead> reads;
  storage::Buffer buffer;  // the packed arrays
};

void TbeDeviceTables::DeleteDeviceCopy::operator()(DeviceCopy* copy) const { delete copy; }

TbeDeviceTables::DeviceRead::DeviceRead(TbeDeviceTables& tables, TbeArgs& args, int device,
                                        void* stream, storage::StorageManager& memory)
    : tables_(tables), device_(device), stream_(stream) {
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  MutexLock lock(&tables.mu_);
  auto& copies = tables.copies_;
  if (copies.size() <= static_cast<std::size_t>(device)) copies.resize(device + 1);
  std::unique_ptr<DeviceCopy, DeleteDeviceCopy>& copy = copies[device];
  if (copy == nullptr) {
    // Made aside and kept only once complete, so that after a failure the
    // next op tries again.
    std::unique_ptr<DeviceCopy, DeleteDeviceCopy> fresh(new DeviceCopy(device));
    const std::vector<int64_t>& values = tables.values_;
    fresh->buffer = memory.Alloc(values.size() * sizeof(int64_t), fresh->own.get());
    TbeUploadCuda(values.data(), static_cast<int64_t>(values.size()),
                  static_cast<int64_t*>(fresh->buffer.data()), device, fresh->own.get());
    CudaCheck(cudaEventRecord(fresh->uploaded.get(), fresh->own.get()),
              "cudaEventRecord (TBE tables upload)");
    copy = std::move(fresh);
  }
  if (!copy->passed) {
    const cudaError_t status = cudaEventQuery(copy->uploaded.get());
    if (status == cudaSuccess) {
      copy->passed = true;
    } else if (status == cudaErrorNotReady) {
      (void)cudaGetLastError();  // an answer, not an error for the next launch check to find
      CudaCheck(cudaStreamWaitEvent(cuda_stream, copy->uploaded.get(), 0),
                "cudaStreamWaitEvent (TBE tables upload)");
    } else {
      CudaCheck(status, "cudaEventQuery (TBE tables upload)");
    }
  }
  bool known = false;
  for (const DeviceCopy::StreamRead& read : copy->reads) known = known || read.stream == stream;
  if (!known) {
    ScopedDevice on(device);
    copy->reads.push_back({stream, CudaEvent::Create("cudaEventCreate (TBE tables read)")});
  }
  tables.PointInto(static_cast<const int64_t*>(copy->buffer.data()), args);
}

TbeDeviceTables::DeviceRead::~DeviceRead() {
  MutexLock lock(&tables_.mu_);
  DeviceCopy& copy = *tables_.copies_[device_];
  for (DeviceCopy::StreamRead& read : copy.reads) {
    if (read.stream != stream_) continue;
    CudaLogIfError(cudaEventRecord(read.event.get(), static_cast<cudaStream_t>(stream_)),
                   "cudaEventRecord (TBE tables read)");
    return;
  }
}

}  // namespace ember::ops::internal
