#include "tools/bench/ops/gather_kernel.h"

#include <cstdint>

namespace ember::bench::ops_bench {
namespace {

constexpr int kThreads = 256;
constexpr unsigned kFullMask = 0xffffffffu;
constexpr uint64_t kRowPrime = 2654435761ull;  // prime, larger than any --rows

__host__ __device__ uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Enough blocks for a grid-stride loop over n items, at most a few waves.
int GridFor(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 65536 ? (blocks > 0 ? blocks : 1) : 65536);
}

template <typename Index>
__global__ void ZipfIndicesKernel(const double* cdf, int64_t rows, int64_t n, int64_t per_table,
                                  uint64_t seed, Index* out) {
  const uint64_t stream = SplitMix64(seed);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t table = i / per_table;
    const double u =
        static_cast<double>(SplitMix64(stream ^ static_cast<uint64_t>(i)) >> 11) * 0x1.0p-53;
    int64_t lo = 0;
    int64_t hi = rows - 1;
    while (lo < hi) {
      const int64_t mid = (lo + hi) / 2;
      if (u < cdf[mid]) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    const uint64_t shift = SplitMix64(stream + 0x632be59bd9b4e019ull * (table + 1)) % rows;
    out[i] = static_cast<Index>((static_cast<uint64_t>(lo) * kRowPrime + shift) % rows);
  }
}

template <typename Index>
__global__ void FixedOffsetsKernel(Index* offsets, int64_t count, int pooling) {
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < count;
       j += int64_t{gridDim.x} * blockDim.x) {
    offsets[j] = static_cast<Index>(j * pooling);
  }
}

__global__ void FillKernel(float* data, int64_t n, uint64_t seed, float scale) {
  const uint64_t stream = SplitMix64(seed);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float u = static_cast<float>(SplitMix64(stream ^ static_cast<uint64_t>(i)) >> 40) *
                    0x1.0p-24f;  // [0, 1)
    data[i] = (u - 0.5f) * scale;
  }
}

template <typename Index>
__global__ void MarkRowsKernel(const Index* indices, int64_t n, int64_t per_table, int64_t rows,
                               uint8_t* marks) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    marks[(i / per_table) * rows + static_cast<int64_t>(indices[i])] = 1;
  }
}

__global__ void CountMarksKernel(const uint8_t* marks, int64_t n, unsigned long long* count) {
  unsigned long long mine = 0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    mine += marks[i];
  }
  for (int delta = 16; delta > 0; delta /= 2) mine += __shfl_down_sync(kFullMask, mine, delta);
  if ((threadIdx.x & 31) == 0 && mine != 0) atomicAdd(count, mine);
}

// See gather_kernel.h. The lane's own lookup is loaded once per 32 lookups
// (coalesced) and handed to the other lanes by shuffles; the kUnroll loads
// of a step are all issued before the first is used.
template <int kUnroll, typename Index>
__global__ void __launch_bounds__(kThreads)
    GatherRowsKernel(const float4* __restrict__ weights, const Index* __restrict__ indices,
                     int64_t n, int64_t per_table, int64_t rows, int vecs, float* sink) {
  static_assert(32 % kUnroll == 0, "a step must not cross the 32 lookups of a warp");
  const int lane = threadIdx.x & 31;
  const int64_t thread = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  const int64_t warps = (int64_t{gridDim.x} * blockDim.x) / 32;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int64_t base = (thread / 32) * 32; base < n; base += warps * 32) {
    const int64_t i = base + lane;
    int64_t row = -1;
    if (i < n) row = (i / per_table) * rows + static_cast<int64_t>(__ldg(indices + i));
    const int64_t left = n - base;
    const int count = left < 32 ? static_cast<int>(left) : 32;
    for (int j = 0; j < count; j += kUnroll) {
      int64_t r[kUnroll];
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) r[k] = __shfl_sync(kFullMask, row, j + k);
      for (int c = lane; c < vecs; c += 32) {
        float4 v[kUnroll];
#pragma unroll
        for (int k = 0; k < kUnroll; ++k) {
          v[k] = r[k] >= 0 ? __ldg(weights + r[k] * vecs + c) : make_float4(0.f, 0.f, 0.f, 0.f);
        }
#pragma unroll
        for (int k = 0; k < kUnroll; ++k) {
          acc.x += v[k].x;
          acc.y += v[k].y;
          acc.z += v[k].z;
          acc.w += v[k].w;
        }
      }
    }
  }
  sink[thread] = acc.x + acc.y + acc.z + acc.w;
}

template <int kUnroll, typename Index>
cudaError_t GatherBlocksOf(int* blocks) {
  int device = 0;
  cudaError_t status = cudaGetDevice(&device);
  int sms = 0;
  if (status == cudaSuccess) {
    status = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  }
  int per_sm = 0;
  if (status == cudaSuccess) {
    status = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, GatherRowsKernel<kUnroll, Index>, kThreads, 0);
  }
  *blocks = sms * (per_sm > 0 ? per_sm : 1);
  return status;
}

template <typename Index>
cudaError_t GatherBlocksFor(int unroll, int* blocks) {
  switch (unroll) {
    case 4:
      return GatherBlocksOf<4, Index>(blocks);
    case 8:
      return GatherBlocksOf<8, Index>(blocks);
    case 16:
      return GatherBlocksOf<16, Index>(blocks);
    default:
      return cudaErrorInvalidValue;
  }
}

template <typename Index>
void LaunchGather(cudaStream_t stream, const float4* weights, const Index* indices, int64_t n,
                  int64_t per_table, int64_t rows, int vecs, int unroll, int blocks, float* sink) {
  switch (unroll) {
    case 4:
      GatherRowsKernel<4>
          <<<blocks, kThreads, 0, stream>>>(weights, indices, n, per_table, rows, vecs, sink);
      break;
    case 8:
      GatherRowsKernel<8>
          <<<blocks, kThreads, 0, stream>>>(weights, indices, n, per_table, rows, vecs, sink);
      break;
    default:
      GatherRowsKernel<16>
          <<<blocks, kThreads, 0, stream>>>(weights, indices, n, per_table, rows, vecs, sink);
      break;
  }
}

}  // namespace

cudaError_t LaunchZipfIndices(cudaStream_t stream, const double* cdf, int64_t rows, int tables,
                              int64_t per_table, uint64_t seed, void* indices, bool index64) {
  const int64_t n = per_table * tables;
  if (index64) {
    ZipfIndicesKernel<<<GridFor(n), kThreads, 0, stream>>>(cdf, rows, n, per_table, seed,
                                                           static_cast<int64_t*>(indices));
  } else {
    ZipfIndicesKernel<<<GridFor(n), kThreads, 0, stream>>>(cdf, rows, n, per_table, seed,
                                                           static_cast<int32_t*>(indices));
  }
  return cudaGetLastError();
}

cudaError_t LaunchFixedOffsets(cudaStream_t stream, void* offsets, int64_t bags, int pooling,
                               bool index64) {
  const int64_t count = bags + 1;
  if (index64) {
    FixedOffsetsKernel<<<GridFor(count), kThreads, 0, stream>>>(static_cast<int64_t*>(offsets),
                                                                count, pooling);
  } else {
    FixedOffsetsKernel<<<GridFor(count), kThreads, 0, stream>>>(static_cast<int32_t*>(offsets),
                                                                count, pooling);
  }
  return cudaGetLastError();
}

cudaError_t LaunchFill(cudaStream_t stream, float* data, int64_t n, uint64_t seed, float scale) {
  FillKernel<<<GridFor(n), kThreads, 0, stream>>>(data, n, seed, scale);
  return cudaGetLastError();
}

cudaError_t CountDistinctRows(cudaStream_t stream, const void* indices, bool index64,
                              int64_t per_table, int tables, int64_t rows, uint8_t* marks,
                              unsigned long long* scratch, int64_t* count) {
  const int64_t n = per_table * tables;
  const int64_t total_rows = rows * tables;
  cudaError_t status = cudaMemsetAsync(marks, 0, static_cast<size_t>(total_rows), stream);
  if (status == cudaSuccess) status = cudaMemsetAsync(scratch, 0, sizeof(*scratch), stream);
  if (status != cudaSuccess) return status;
  if (index64) {
    MarkRowsKernel<<<GridFor(n), kThreads, 0, stream>>>(static_cast<const int64_t*>(indices), n,
                                                        per_table, rows, marks);
  } else {
    MarkRowsKernel<<<GridFor(n), kThreads, 0, stream>>>(static_cast<const int32_t*>(indices), n,
                                                        per_table, rows, marks);
  }
  CountMarksKernel<<<GridFor(total_rows), kThreads, 0, stream>>>(marks, total_rows, scratch);
  if ((status = cudaGetLastError()) != cudaSuccess) return status;
  unsigned long long host = 0;
  status = cudaMemcpyAsync(&host, scratch, sizeof(host), cudaMemcpyDeviceToHost, stream);
  if (status == cudaSuccess) status = cudaStreamSynchronize(stream);
  *count = static_cast<int64_t>(host);
  return status;
}

cudaError_t GatherBlocks(int unroll, bool index64, int* blocks) {
  return index64 ? GatherBlocksFor<int64_t>(unroll, blocks)
                 : GatherBlocksFor<int32_t>(unroll, blocks);
}

cudaError_t LaunchGatherRows(cudaStream_t stream, const float* weights, const void* indices,
                             bool index64, int64_t per_table, int tables, int64_t rows, int dim,
                             int unroll, int blocks, float* sink) {
  const auto* rows4 = reinterpret_cast<const float4*>(weights);
  const int64_t n = per_table * tables;
  if (index64) {
    LaunchGather(stream, rows4, static_cast<const int64_t*>(indices), n, per_table, rows, dim / 4,
                 unroll, blocks, sink);
  } else {
    LaunchGather(stream, rows4, static_cast<const int32_t*>(indices), n, per_table, rows, dim / 4,
                 unroll, blocks, sink);
  }
  return cudaGetLastError();
}

}  // namespace ember::bench::ops_bench
