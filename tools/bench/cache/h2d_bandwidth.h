#pragma once

// The host-to-GPU references of ember-bench-cache, measured in the same run
// as the prefetch they bound, on the current device with a stream of the
// bench's own and CUDA events:
//
//   memcpy      cudaMemcpyAsync of a pinned host buffer into device memory
//   zero-copy   a kernel reading the same buffer, mapped into the device's
//               address space (cudaHostAllocMapped), 16-byte loads in
//               sequence, 4 in flight per thread, every SM full
//   rows        the same kernel shape reading random rows of `row_bytes`
//               of it (a warp per row, 4 rows in flight per warp): what a
//               prefetch reads from a host-mapped home, without the cache
//   managed     the rows kernel over managed memory that prefers the CPU and
//               that the device reads in place (a managed home's memory:
//               storage's UVM), of the same size
//
// GB/s = bytes read / time; the rows case reads buffer bytes / row_bytes
// rows, each once on average.
//
// Thread safety: the bench's main thread only.

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace ember::bench::cache_bench {

class H2dProbe {
 public:
  // A pinned, mapped host buffer of `bytes`, a device buffer of
  // the same size, and bytes / row_bytes random row numbers from `seed`;
  // with `managed`, a managed buffer of `bytes` too (the caller keeps it
  // within the GPU's free memory).
  // REQUIRES: row_bytes a positive multiple of 16. Throws CudaError.
  H2dProbe(std::size_t bytes, int64_t row_bytes, uint64_t seed, bool managed);
  ~H2dProbe();
  H2dProbe(const H2dProbe&) = delete;
  H2dProbe& operator=(const H2dProbe&) = delete;

  [[nodiscard]] std::size_t bytes() const { return bytes_; }
  [[nodiscard]] int64_t row_bytes() const { return row_bytes_; }

  // Milliseconds of one pass of each (one untimed pass first is the
  // caller's warm-up).
  double MemcpyMs();
  double ZeroCopyMs();
  double ZeroCopyRowsMs();
  // REQUIRES: constructed with `managed`.
  double ManagedRowsMs();

 private:
  double Time(void (*launch)(H2dProbe&));
  static void LaunchMemcpy(H2dProbe& probe);
  static void LaunchZeroCopy(H2dProbe& probe);
  static void LaunchRows(H2dProbe& probe);
  static void LaunchManagedRows(H2dProbe& probe);
  void LaunchRowsOf(const void* buffer);

  std::size_t bytes_;
  int64_t row_bytes_;
  int64_t rows_;
  void* host_ = nullptr;         // pinned, mapped
  void* host_mapped_ = nullptr;  // its device address
  void* device_ = nullptr;
  void* managed_ = nullptr;     // on the host, read in place
  int32_t* row_ids_ = nullptr;  // device
  void* sink_ = nullptr;        // device; what the kernels write
  int blocks_ = 0;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

}  // namespace ember::bench::cache_bench
