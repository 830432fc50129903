// The CUDA matmul kernel: one cublasGemmEx on the op's stream, f32 in and
// out, computing in CUBLAS_COMPUTE_32F (what cublasSgemm does) or, where
// TF32 is allowed, CUBLAS_COMPUTE_32F_FAST_TF32. The precision is the
// call's, not the handle's math mode, which a thread's handle would carry
// over to its next matmul.
//
// Handles. A cuBLAS handle belongs to the device that was current when it
// was made, and making one costs milliseconds, so each thread keeps one per
// device (thread_local), made on the thread's first matmul there. Engine
// workers are long-lived threads, so there are few. The handle's stream is
// set before every call: a worker may run ops on several streams (the
// round-robin set of ThreadedEngine, the other pool's stream in the Async
// engines). The scratch memory stays cuBLAS's default workspace pool, which
// cublasSetStream re-selects and cuBLAS hands out per stream (sized by
// CUBLAS_WORKSPACE_CONFIG), rather than one buffer of ours that kernels on
// two streams could overlap in.
//
// Layout. cuBLAS is column-major, and a row-major [r, c] matrix is, read
// column-major, its transpose [c, r]. So row-major C = op(A) op(B) is
// computed as column-major C^T = op(B)^T op(A)^T: the same call with A and
// B swapped and m and n swapped, each keeping its transpose flag.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "engine/cuda/check.h"
#include "engine/cuda/scoped_device.h"
#include "engine/error.h"
#include "ops/internal/matmul_kernels.h"

namespace ember::ops::internal {
namespace {

// Throws CudaError "[cublasGemmEx of op 'Matmul'] CUBLAS_STATUS_... (text)
// at ops/matmul_cuda.cc:NN" unless `status` is a success.
void CublasCheck(cublasStatus_t status, std::string_view call, std::string_view op,
                 SourcePlace where = SourcePlace::Here()) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw CudaError(fmt::format("[{} of op '{}'] {} ({}) at {}:{}", call, op,
                              cublasGetStatusName(status), cublasGetStatusString(status),
                              where.file, where.line));
}

// The calling thread's handles, by device.
class ThreadHandles {
 public:
  ThreadHandles() = default;
  ThreadHandles(const ThreadHandles&) = delete;
  ThreadHandles& operator=(const ThreadHandles&) = delete;

  // Runs at thread exit, while the CUDA runtime is still up (a thread's
  // thread_local objects go before the process's statics). Nothing can be
  // reported from here, so failures are ignored; the thread's current
  // device is not restored (the thread is ending).
  ~ThreadHandles() {
    for (std::size_t device = 0; device < handles_.size(); ++device) {
      if (handles_[device] == nullptr) continue;
      if (cudaSetDevice(static_cast<int>(device)) == cudaSuccess) cublasDestroy(handles_[device]);
      (void)cudaGetLastError();
    }
  }

  // The handle of the calling thread's current device (the op's: the engine
  // made it current), bound to `stream`.
  cublasHandle_t For(cudaStream_t stream, std::string_view op) {
    cublasHandle_t handle = OfCurrentDevice(op);
    CublasCheck(cublasSetStream(handle, stream), "cublasSetStream", op);
    return handle;
  }

  // The handle of the calling thread's current device, made if needed.
  cublasHandle_t OfCurrentDevice(std::string_view op) {
    int device = 0;
    CudaCheckForOp(cudaGetDevice(&device), "cudaGetDevice", op);
    if (static_cast<std::size_t>(device) >= handles_.size()) handles_.resize(device + 1, nullptr);
    cublasHandle_t& handle = handles_[device];
    if (handle == nullptr) CublasCheck(cublasCreate(&handle), "cublasCreate", op);
    return handle;
  }

 private:
  std::vector<cublasHandle_t> handles_;  // by device; null: not made yet
};

ThreadHandles& Handles() {
  thread_local ThreadHandles handles;
  return handles;
}

}  // namespace

void MatmulCuda(const MatmulArgs& args, void* stream, std::string_view op) {
  if (args.m == 0 || args.n == 0) return;
  cublasHandle_t handle = Handles().For(static_cast<cudaStream_t>(stream), op);
  const cublasComputeType_t compute = args.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  CublasCheck(cublasGemmEx(handle, args.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                           args.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, args.n, args.m, args.k,
                           &args.alpha, args.b, CUDA_R_32F, LeadingDimB(args), args.a, CUDA_R_32F,
                           LeadingDimA(args), &args.beta, args.c, CUDA_R_32F, args.n, compute,
                           CUBLAS_GEMM_DEFAULT),
              "cublasGemmEx", op);
}

void LoadMatmulKernelsCuda(int device, std::string_view op) {
  ScopedDevice on(device);
  (void)Handles().OfCurrentDevice(op);
}

}  // namespace ember::ops::internal
