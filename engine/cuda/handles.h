#pragma once

// CudaEvent and CudaStream: owners of a CUDA event and stream, for CUDA code
// of every layer (MLX's one move-only RAII base for CUDA handles). Each is
// made by Create (which throws CudaError naming what it was for), moved but
// never copied, and destroyed with its owner; a destroy that fails is
// logged, never thrown (destructors may run during unwinding).
//
// For CUDA code only: includes cuda_runtime_api.h.
//
// Thread safety: an owner is a value; the handle it holds may be used from
// any thread, as CUDA allows.

#include <string_view>
#include <utility>

#include <cuda_runtime_api.h>

#include "engine/cuda/check.h"

namespace ember {

// Owns one handle of type T, destroyed by Destroy.
template <typename T, cudaError_t (*Destroy)(T)>
class CudaHandle {
 public:
  CudaHandle() = default;
  explicit CudaHandle(T handle) : handle_(handle) {}
  CudaHandle(CudaHandle&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  CudaHandle& operator=(CudaHandle&& other) noexcept {
    if (this != &other) {
      Reset();
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }
  CudaHandle(const CudaHandle&) = delete;
  CudaHandle& operator=(const CudaHandle&) = delete;
  ~CudaHandle() { Reset(); }

  [[nodiscard]] T get() const { return handle_; }
  explicit operator bool() const { return handle_ != nullptr; }
  // Gives up ownership.
  [[nodiscard]] T release() { return std::exchange(handle_, nullptr); }

 private:
  void Reset() {
    if (handle_ != nullptr) CudaLogIfError(Destroy(std::exchange(handle_, nullptr)), "destroy");
  }

  T handle_ = nullptr;
};

class CudaEvent : public CudaHandle<cudaEvent_t, cudaEventDestroy> {
 public:
  using CudaHandle::CudaHandle;
  // A new event on the current device; `what` names it in a failure.
  static CudaEvent Create(std::string_view what, unsigned flags = cudaEventDisableTiming,
                          SourcePlace where = SourcePlace::Here()) {
    cudaEvent_t event = nullptr;
    CudaCheck(cudaEventCreateWithFlags(&event, flags), what, where);
    return CudaEvent(event);
  }
};

class CudaStream : public CudaHandle<cudaStream_t, cudaStreamDestroy> {
 public:
  using CudaHandle::CudaHandle;
  // A new stream on the current device (non-blocking: it does not wait for
  // the legacy default stream); `what` names it in a failure.
  static CudaStream Create(std::string_view what, unsigned flags = cudaStreamNonBlocking,
                           SourcePlace where = SourcePlace::Here()) {
    cudaStream_t stream = nullptr;
    CudaCheck(cudaStreamCreateWithFlags(&stream, flags), what, where);
    return CudaStream(stream);
  }
  // A new non-blocking stream at `priority` (cudaDeviceGetStreamPriorityRange:
  // a smaller number is a higher priority): when SMs free up, the scheduler
  // starts pending blocks of higher-priority streams first.
  static CudaStream CreateAt(int priority, std::string_view what,
                             SourcePlace where = SourcePlace::Here()) {
    cudaStream_t stream = nullptr;
    CudaCheck(cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, priority), what, where);
    return CudaStream(stream);
  }
  // A new non-blocking stream at the device's highest priority.
  static CudaStream CreateUrgent(std::string_view what, SourcePlace where = SourcePlace::Here()) {
    int least = 0, greatest = 0;
    CudaCheck(cudaDeviceGetStreamPriorityRange(&least, &greatest), what, where);
    return CreateAt(greatest, what, where);
  }
};

}  // namespace ember
