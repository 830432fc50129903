#pragma once

// What the CUDA side of ember-bench-ops (ops_cases.cc) needs besides its
// kernels: device memory of the bench's own, and the bench's
// stream with a pair of events to time it.
//
// Thread safety: the bench's main thread only.

#include <cstddef>
#include <functional>

#include <cuda_runtime_api.h>

#include "absl/strings/str_format.h"
#include "engine/error.h"
#include "tools/bench/common/cuda_device.h"

namespace ember::bench::ops_bench {

// Device memory of the bench's own (cudaMalloc), freed with this.
class DeviceMemory {
 public:
  explicit DeviceMemory(std::size_t bytes) { CheckCuda(cudaMalloc(&data_, bytes), "cudaMalloc"); }
  ~DeviceMemory() { (void)cudaFree(data_); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  template <typename T>
  [[nodiscard]] T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  void* data_ = nullptr;
};

// The bench's stream and a pair of events to time it.
class Stream {
 public:
  Stream() {
    CheckCuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    CheckCuda(cudaEventCreate(&start_), "cudaEventCreate");
    CheckCuda(cudaEventCreate(&stop_), "cudaEventCreate");
  }
  ~Stream() {
    (void)cudaEventDestroy(start_);
    (void)cudaEventDestroy(stop_);
    (void)cudaStreamDestroy(stream_);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  [[nodiscard]] cudaStream_t get() const { return stream_; }
  void Sync() const { CheckCuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }
  // Milliseconds of `iters` calls of `launch` on the stream.
  double Time(const std::function<void()>& launch, int iters) const {
    CheckCuda(cudaEventRecord(start_, stream_), "cudaEventRecord");
    for (int i = 0; i < iters; ++i) launch();
    CheckCuda(cudaEventRecord(stop_, stream_), "cudaEventRecord");
    CheckCuda(cudaEventSynchronize(stop_), "cudaEventSynchronize");
    float ms = 0;
    CheckCuda(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    return ms;
  }

 private:
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

}  // namespace ember::bench::ops_bench
