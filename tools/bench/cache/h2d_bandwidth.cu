// The host-to-GPU references (h2d_bandwidth.h). The kernels only read: each
// thread folds what it loaded into one 16-byte value it writes at the end,
// so their traffic is the bytes read.

#include "tools/bench/cache/h2d_bandwidth.h"

#include <cstring>
#include <vector>

#include "tools/bench/common/cuda_device.h"

namespace ember::bench::cache_bench {
namespace {

constexpr int kThreads = 256;
constexpr int kInFlight = 4;

// SplitMix64 (device code is C++17 here: zipf_trace.h, which is C++20, stays
// out).
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

__device__ inline void Fold(uint4& acc, const uint4& v) {
  acc.x ^= v.x;
  acc.y ^= v.y;
  acc.z ^= v.z;
  acc.w ^= v.w;
}

// `n` 16-byte words in sequence, grid-stride, kInFlight loads per thread
// in flight.
__global__ void ReadSequential(const uint4* __restrict__ src, int64_t n, uint4* sink) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  uint4 acc = make_uint4(0, 0, 0, 0);
  for (; i + (kInFlight - 1) * stride < n; i += kInFlight * stride) {
    uint4 v[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) v[u] = src[i + u * stride];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) Fold(acc, v[u]);
  }
  for (; i < n; i += stride) Fold(acc, src[i]);
  sink[int64_t(blockIdx.x) * blockDim.x + threadIdx.x] = acc;
}

// Rows ids[0 .. rows) of `vecs` 16-byte words each, a warp per row,
// kInFlight rows in flight per warp.
__global__ void ReadRows(const uint4* __restrict__ src, const int32_t* __restrict__ ids,
                         int64_t rows, int vecs, uint4* sink) {
  const int lane = threadIdx.x & 31;
  const int64_t warp = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int64_t warps = (int64_t(gridDim.x) * blockDim.x) >> 5;
  uint4 acc = make_uint4(0, 0, 0, 0);
  for (int64_t r = warp; r < rows; r += kInFlight * warps) {
    int64_t base[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int64_t row = r + u * warps;
      base[u] = row < rows ? int64_t(ids[row]) * vecs : -1;
    }
    for (int j = lane; j < vecs; j += 32) {
      uint4 v[kInFlight];
#pragma unroll
      for (int u = 0; u < kInFlight; ++u) {
        v[u] = base[u] >= 0 ? src[base[u] + j] : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < kInFlight; ++u) Fold(acc, v[u]);
    }
  }
  sink[int64_t(blockIdx.x) * blockDim.x + threadIdx.x] = acc;
}

}  // namespace

H2dProbe::H2dProbe(std::size_t bytes, int64_t row_bytes, uint64_t seed, bool managed)
    : bytes_(bytes / 16 * 16), row_bytes_(row_bytes), rows_(int64_t(bytes / row_bytes)) {
  int device = 0;
  CheckCuda(cudaGetDevice(&device), "cudaGetDevice");
  CheckCuda(cudaHostAlloc(&host_, bytes_, cudaHostAllocMapped), "cudaHostAlloc (mapped)");
  CheckCuda(cudaHostGetDevicePointer(&host_mapped_, host_, 0), "cudaHostGetDevicePointer");
  CheckCuda(cudaMalloc(&device_, bytes_), "cudaMalloc");
  if (managed) {  // as storage's UVM allocates it, its pages made on the host
    CheckCuda(cudaMallocManaged(&managed_, bytes_), "cudaMallocManaged");
    CheckCuda(cudaMemAdvise(managed_, bytes_, cudaMemAdviseSetPreferredLocation,
                            cudaMemLocation{cudaMemLocationTypeHost, 0}),
              "cudaMemAdvise (prefer the CPU)");
    CheckCuda(cudaMemAdvise(managed_, bytes_, cudaMemAdviseSetAccessedBy,
                            cudaMemLocation{cudaMemLocationTypeDevice, device}),
              "cudaMemAdvise (accessed by the GPU)");
    std::memset(managed_, 1, bytes_);
  }
  CheckCuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  CheckCuda(cudaEventCreate(&start_), "cudaEventCreate");
  CheckCuda(cudaEventCreate(&stop_), "cudaEventCreate");
  int sms = 0;
  int per_sm = 0;
  CheckCuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
            "cudaDeviceGetAttribute");
  CheckCuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, ReadRows, kThreads, 0),
            "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  blocks_ = sms * per_sm;
  CheckCuda(cudaMalloc(&sink_, std::size_t(blocks_) * kThreads * sizeof(uint4)), "cudaMalloc");
  std::vector<int32_t> ids(static_cast<std::size_t>(rows_));
  for (int64_t i = 0; i < rows_; ++i) {
    ids[i] = static_cast<int32_t>(Mix(Mix(seed) + uint64_t(i)) % uint64_t(rows_));
  }
  CheckCuda(cudaMalloc(&row_ids_, ids.size() * sizeof(int32_t)), "cudaMalloc");
  CheckCuda(cudaMemcpy(row_ids_, ids.data(), ids.size() * sizeof(int32_t), cudaMemcpyHostToDevice),
            "cudaMemcpy (row ids)");
}

H2dProbe::~H2dProbe() {
  (void)cudaStreamSynchronize(stream_);
  (void)cudaEventDestroy(start_);
  (void)cudaEventDestroy(stop_);
  (void)cudaStreamDestroy(stream_);
  (void)cudaFree(row_ids_);
  (void)cudaFree(sink_);
  (void)cudaFree(device_);
  if (managed_ != nullptr) (void)cudaFree(managed_);
  (void)cudaFreeHost(host_);
}

double H2dProbe::Time(void (*launch)(H2dProbe&)) {
  CheckCuda(cudaEventRecord(start_, stream_), "cudaEventRecord");
  launch(*this);
  CheckCuda(cudaEventRecord(stop_, stream_), "cudaEventRecord");
  CheckCuda(cudaEventSynchronize(stop_), "cudaEventSynchronize");
  float ms = 0;
  CheckCuda(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
  return ms;
}

void H2dProbe::LaunchMemcpy(H2dProbe& p) {
  CheckCuda(cudaMemcpyAsync(p.device_, p.host_, p.bytes_, cudaMemcpyHostToDevice, p.stream_),
            "cudaMemcpyAsync (pinned to device)");
}

void H2dProbe::LaunchZeroCopy(H2dProbe& p) {
  ReadSequential<<<p.blocks_, kThreads, 0, p.stream_>>>(static_cast<const uint4*>(p.host_mapped_),
                                                        int64_t(p.bytes_ / 16),
                                                        static_cast<uint4*>(p.sink_));
  CheckCuda(cudaGetLastError(), "kernel launch (ReadSequential)");
}

void H2dProbe::LaunchRowsOf(const void* buffer) {
  ReadRows<<<blocks_, kThreads, 0, stream_>>>(static_cast<const uint4*>(buffer), row_ids_, rows_,
                                              int(row_bytes_ / 16), static_cast<uint4*>(sink_));
  CheckCuda(cudaGetLastError(), "kernel launch (ReadRows)");
}

void H2dProbe::LaunchRows(H2dProbe& p) { p.LaunchRowsOf(p.host_mapped_); }
void H2dProbe::LaunchManagedRows(H2dProbe& p) { p.LaunchRowsOf(p.managed_); }

double H2dProbe::MemcpyMs() { return Time(LaunchMemcpy); }
double H2dProbe::ZeroCopyMs() { return Time(LaunchZeroCopy); }
double H2dProbe::ZeroCopyRowsMs() { return Time(LaunchRows); }
double H2dProbe::ManagedRowsMs() { return Time(LaunchManagedRows); }

}  // namespace ember::bench::cache_bench
