#pragma once

// TbeDeviceTables: TbeTables' per-table arrays as the kernels read them,
// packed once on the host and copied once to each GPU that runs an op on
// them (every push used to repack and upload them).
//
// State model. Made with its TbeTables, which shares it with its copies and
// with every op pushed with it, so it lives while any of them does. The
// host copy is fixed at construction. A GPU's copy is made by the first op
// that reads it there (DeviceRead): allocated from that op's device manager
// and filled on a stream of the copy's own, followed by an event that op
// streams wait for until the GPU is known to have passed it (then nobody
// waits again). Each op's read is noted by an event on its stream, recorded
// after its kernels (one per stream, recorded again by each op). The copy
// is released with this object without blocking: its own stream waits for
// those events and the memory goes back to its manager fenced on that
// stream.
//
// Why a stream of its own and events rather than the op streams as the
// buffer's users (Buffer::RecordUse): the buffer is released when the last
// TbeTables copy goes, which may be after the engines whose streams ran the
// ops are gone; an event outlives its stream, a stream handle does not.
//
// Thread safety: thread-safe; ops on several workers may read at once.
//
// Memory ordering: kernels launched on `stream` while a DeviceRead for it
// lives read the complete copy (the stream waited for the upload's event).

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/base/mutex.h"
#include "ops/embedding_bag.h"
#include "ops/internal/embedding_bag_args.h"
#include "ops/internal/tbe_plan.h"

namespace ember::storage {
class StorageManager;
}  // namespace ember::storage

namespace ember::ops::internal {

class TbeDeviceTables {
 public:
  explicit TbeDeviceTables(const TbeTables& tables);
  ~TbeDeviceTables() = default;
  TbeDeviceTables(const TbeDeviceTables&) = delete;
  TbeDeviceTables& operator=(const TbeDeviceTables&) = delete;

  [[nodiscard]] int num_tables() const { return num_tables_; }
  [[nodiscard]] const TbeTablesSummary& summary() const { return summary_; }
  // The packed arrays: rows (T), dims (T), then the T + 1 row, weight and
  // output offsets (5T + 3 values).
  [[nodiscard]] const std::vector<int64_t>& host_values() const { return values_; }

  // Points args' per-table arrays into the host copy.
  void PointAtHost(TbeArgs& args) const { PointInto(values_.data(), args); }

  // One op's read of the copy on a GPU, for the op's kernel launches:
  // construction points args there (making the copy first if there is
  // none, with memory from `memory`, kDevice of `device`); destruction,
  // after the op launched its kernels on `stream`, notes that they read it.
  // `stream` is a cudaStream_t of `device`, which is current. Never waits
  // on the host. Construction throws CudaError, OutOfMemory (Unavailable
  // in a build without CUDA); destruction logs what fails.
  class DeviceRead {
   public:
    DeviceRead(TbeDeviceTables& tables, TbeArgs& args, int device, void* stream,
               storage::StorageManager& memory);
    ~DeviceRead();
    DeviceRead(const DeviceRead&) = delete;
    DeviceRead& operator=(const DeviceRead&) = delete;

   private:
    TbeDeviceTables& tables_;
    int device_;
    void* stream_;
  };

 private:
  // A GPU's copy, defined with the CUDA code (and deleted there).
  struct DeviceCopy;
  struct DeleteDeviceCopy {
    void operator()(DeviceCopy* copy) const;
  };

  void PointInto(const int64_t* base, TbeArgs& args) const;

  const int num_tables_;
  std::vector<int64_t> values_;
  TbeTablesSummary summary_;

  Mutex mu_;
  std::vector<std::unique_ptr<DeviceCopy, DeleteDeviceCopy>> copies_
      ABSL_GUARDED_BY(mu_);  // by device
};

// The TbeDeviceTables a TbeTables shares (its private member).
struct TbeTablesAccess {
  static const std::shared_ptr<TbeDeviceTables>& DeviceTables(const TbeTables& tables) {
    return tables.device_tables_;
  }
};

}  // namespace ember::ops::internal
