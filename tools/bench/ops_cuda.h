#pragma once

// What the CUDA side of ember-bench-ops (ops_cases.cc) needs besides its
// kernels: the CUDA check, device memory of the bench's own, and the bench's
// stream with a pair of events to time it.
//
// Thread safety: the bench's main thread only.

#include <cstddef>
#include <functional>

#include <cuda_runtime_api.h>

#include "absl/strings/str_format.h"
#include "engine/error.h"

namespace ember::bench::ops_bench {

// Throws ember::CudaError naming `call` when `status` is not cudaSuccess.
inline void Check(cudaError_t status, const char* call) {
  if (status == cudaSuccess) return;
  throw CudaError(absl::StrFormat("[ember-bench-ops] %s: %s (%s)", call, cudaGetErrorName(status),
                                  cudaGetErrorString(status)));
}

// Device memory of the bench's own (cudaMalloc), freed with this.
class DeviceMemory {
 public:
  explicit DeviceMemory(std::size_t bytes) { Check(cudaMalloc(&data_, bytes), "cudaMalloc"); }
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
    Check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    Check(cudaEventCreate(&start_), "cudaEventCreate");
    Check(cudaEventCreate(&stop_), "cudaEventCreate");
  }
  ~Stream() {
    (void)cudaEventDestroy(start_);
    (void)cudaEventDestroy(stop_);
    (void)cudaStreamDestroy(stream_);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  [[nodiscard]] cudaStream_t get() const { return stream_; }
  void Sync() const { Check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }
  // Milliseconds of `iters` calls of `launch` on the stream.
  double Time(const std::function<void()>& launch, int iters) const {
    Check(cudaEventRecord(start_, stream_), "cudaEventRecord");
    for (int i = 0; i < iters; ++i) launch();
    Check(cudaEventRecord(stop_, stream_), "cudaEventRecord");
    Check(cudaEventSynchronize(stop_), "cudaEventSynchronize");
    float ms = 0;
    Check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    return ms;
  }

 private:
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

}  // namespace ember::bench::ops_bench
