#pragma once

// ScopedDevice: makes a device the calling thread's current CUDA device for
// a scope, and restores the one before on exit, so that code that needs a
// device (making events or streams, querying it) leaves the thread as it
// found it. cudaSetDevice is skipped when the device is already current.
//
// For CUDA code only: includes cuda_runtime_api.h.
//
// Thread safety: acts on the calling thread's current device only.

#include <cuda_runtime_api.h>

#include "engine/cuda/check.h"

namespace ember {

class ScopedDevice {
 public:
  // Throws CudaError when the device cannot be made current.
  explicit ScopedDevice(int device, SourcePlace where = SourcePlace::Here()) {
    CudaCheck(cudaGetDevice(&previous_), "cudaGetDevice", where);
    if (device != previous_) CudaCheck(cudaSetDevice(device), "cudaSetDevice", where);
    changed_ = device != previous_;
  }
  ~ScopedDevice() {
    if (changed_) CudaLogIfError(cudaSetDevice(previous_), "cudaSetDevice (restore)");
  }
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

 private:
  int previous_ = 0;
  bool changed_ = false;
};

}  // namespace ember
