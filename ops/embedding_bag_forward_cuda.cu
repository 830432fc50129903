// TbeForwardCuda: the TBE forward on the GPU; with validation it marks the
// first bad bag as it reads (the other check kernels are in
// ops/internal/tbe_fault_cuda.cu).
//
// Forward, FBGEMM's layout: one warp per (table, bag), bags of one table on
// neighbouring warps (hot rows of a table meet in L2). A 128-dim f32 row is one
// coalesced 512-byte read: each lane loads 4 floats (one float4) and sums them
// in registers. The bag goes 32 entries at a time: lane j reads entry j's
// index and turns it into the address of its row; the warp then loads
// kUnroll rows at a time, each lane taking its columns of a row whose
// address it gets by a shuffle. Narrower rows split the warp into lane
// groups that pool different rows of the bag and meet by shuffles; wider
// rows go in chunks of 128 columns. Rows whose dim is not a multiple of 4,
// or whose table or output start is not 16-byte aligned, take the same path
// one column per lane. f16/bf16 rows load 4 elements (8 bytes) a lane and
// sum in f32. Entries outside the bag's clamped offsets, or indices out of
// range, are skipped, so without validation bad input is never
// dereferenced.
//
// Speed (H100, ember-bench-ops' default grid: dim 128 f32, i32 indices,
// Zipf(1.05) over 1M rows, 8-32 tables, pooling 20-80, batch 16k-64k, where
// 76-91% of lookups hit L2): 76-113% of the bench's random-row gather
// bandwidth (the least at pooling 20) and 3.2-3.9x PyTorch's embedding_bag;
// with uniform indices (DRAM-bound) 97-98% of the gather. What got it there,
// each measured beside the others in one run: 4 blocks an SM (64
// registers) with 4 rows in flight per warp instead of 2 blocks with 8
// (L2-bound Zipf lookups want more warps, not more rows per warp); no L2
// prefetch of the chunk's rows (with 32 warps an SM it made lookups
// 1.1-1.5x slower: one more request per line for L2 to serve); shuffling a
// row's address rather than its index (one multiply per entry instead of
// one per row and lane) and the weight only when there are per-sample
// weights: 1.25-1.3x. Not kept: persistent warps that load the next bag's
// offsets and indices ahead (in registers or by cp.async into shared
// memory; slower: more registers or fewer warps), 5-6 blocks an SM
// (spills), kernels specialized for float4 rows or one column chunk, and
// shuffling the 32-bit index instead of the address (none faster).
//
// CUDA calls are checked with the base layer's CudaCheckForOp and
// CudaCheckLaunch (engine/cuda/check.h).

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "engine/error.h"
#include "ops/internal/cuda_launch.cuh"
#include "ops/internal/embedding_bag_fault.h"
#include "ops/internal/embedding_bag_kernels.h"

namespace ember::ops::internal {
namespace {

constexpr int kWarp = 32;
constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / kWarp;
constexpr unsigned kFullMask = 0xffffffffu;
// Rows a lane group loads into registers at once, and the blocks an SM
// holds (64 registers a thread, the most that hold kUnroll float4 rows
// without spilling). Measured on an H100 beside 8 rows at 2 or 4 blocks
// and 4 rows at 5, 6 or 8 blocks (which spill): the fastest on Zipf and
// on uniform indices alike (see the top comment).
constexpr int kUnroll = 4;
constexpr int kMinBlocksPerSm = 4;

int64_t NumBags(const TbeArgs& args) { return int64_t{args.num_tables} * args.batch_size; }

unsigned BlocksFor(int64_t warps, const char* what) {
  const int64_t blocks = (warps + kWarpsPerBlock - 1) / kWarpsPerBlock;
  if (blocks > INT_MAX) {
    throw InvalidArgument(std::string("[") + what + "] " + std::to_string(warps) +
                          " bags are more than one launch can take");
  }
  return static_cast<unsigned>(blocks);
}

// ---- Loads and stores: V weights as f32 -----------------------------------

__device__ __forceinline__ void Load(const float* p, float (&v)[4]) {
  const float4 x = __ldg(reinterpret_cast<const float4*>(p));
  v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
}
__device__ __forceinline__ void Load(const float* p, float (&v)[1]) { v[0] = __ldg(p); }

__device__ __forceinline__ void Load(const __half* p, float (&v)[4]) {
  const uint2 raw = __ldg(reinterpret_cast<const uint2*>(p));
  const float2 lo = __half22float2(*reinterpret_cast<const __half2*>(&raw.x));
  const float2 hi = __half22float2(*reinterpret_cast<const __half2*>(&raw.y));
  v[0] = lo.x, v[1] = lo.y, v[2] = hi.x, v[3] = hi.y;
}
__device__ __forceinline__ void Load(const __half* p, float (&v)[1]) {
  v[0] = __half2float(__ldg(p));
}

__device__ __forceinline__ void Load(const __nv_bfloat16* p, float (&v)[4]) {
  const uint2 raw = __ldg(reinterpret_cast<const uint2*>(p));
  const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
  const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
  v[0] = lo.x, v[1] = lo.y, v[2] = hi.x, v[3] = hi.y;
}
__device__ __forceinline__ void Load(const __nv_bfloat16* p, float (&v)[1]) {
  v[0] = __bfloat162float(__ldg(p));
}

// __stwb: a plain (write-back) store that stays one 16-byte store; the
// assignment through a float4 pointer was split into four 4-byte stores.
__device__ __forceinline__ void Store(float* p, const float (&v)[4]) {
  __stwb(reinterpret_cast<float4*>(p), make_float4(v[0], v[1], v[2], v[3]));
}
__device__ __forceinline__ void Store(float* p, const float (&v)[1]) { *p = v[0]; }

// ---- Forward --------------------------------------------------------------

// Bag g's entries, clamped into [0, num_indices]; a decreasing pair gives an
// empty bag. Valid offsets pass unchanged.
template <typename Index>
__device__ __forceinline__ void ReadBag(const Index* offsets, int64_t g, int64_t num_indices,
                                        int64_t& start, int64_t& end) {
  start = min(max(int64_t{offsets[g]}, int64_t{0}), num_indices);
  end = min(max(int64_t{offsets[g + 1]}, start), num_indices);
}

// One warp's bag: where its rows and its output are.
template <typename Index, typename Weight>
struct WarpBag {
  const Index* indices;
  const float* per_sample_weights;  // null: all 1
  const Weight* table;              // the table's first element
  const int32_t* locations;         // null: every row at home (TbeArgs::locations)
  const Weight* slots;              // the cache's slots
  int64_t slot_stride;
  float* out;  // the bag's first output column
  int64_t rows;
  int64_t dim;
  int64_t start;
  int64_t end;
  float scale;  // 1, or 1 / |bag| for mean pooling
};

__device__ __forceinline__ int NextPow2(int x) { return x <= 1 ? 1 : 1 << (32 - __clz(x - 1)); }

// A pointer from lane `src` (all 32 lanes call it).
template <typename Weight>
__device__ __forceinline__ const Weight* ShflPointer(const Weight* p, int src) {
  return reinterpret_cast<const Weight*>(
      __shfl_sync(kFullMask, reinterpret_cast<unsigned long long>(p), src));
}

// Pools columns [c0, c0 + cols) of the bag, V columns a lane. A row takes
// `lanes` lanes (a power of two); the warp's 32 / lanes groups take
// successive entries of the bag and are summed by shuffles at the end.
// Entries go 32 at a time: lane j reads entry j's index and weight and
// computes where its row's columns start (null: skipped), so a load costs
// one pointer shuffle and no multiply; the weight is shuffled only when
// there are per-sample weights. Every branch around a shuffle is
// warp-uniform. Returns whether this lane read an index out of range.
template <int V, typename Index, typename Weight>
__device__ __forceinline__ bool PoolColumns(const WarpBag<Index, Weight>& bag, int64_t c0, int cols,
                                            int lane) {
  const int lanes = NextPow2((cols + V - 1) / V);
  const int groups = kWarp / lanes;
  const int group = lane / lanes;
  const int col = (lane % lanes) * V;
  const bool active = col < cols;
  const bool weighted = bag.per_sample_weights != nullptr;
  float sum[V] = {};
  bool bad_index = false;
  for (int64_t base = bag.start; base < bag.end; base += kWarp) {
    const int n = static_cast<int>(min(int64_t{kWarp}, bag.end - base));
    // Lane j holds entry base + j: its row's columns and its weight.
    const Weight* my_src = nullptr;
    float my_weight = 1.0f;
    if (lane < n) {
      const int64_t index = bag.indices[base + lane];
      if (IndexInRange(index, bag.rows)) {
        const int32_t slot = bag.locations != nullptr ? bag.locations[base + lane] : -1;
        my_src =
            (slot >= 0 ? bag.slots + slot * bag.slot_stride : bag.table + index * bag.dim) + c0;
        if (weighted) my_weight = bag.per_sample_weights[base + lane];
      } else {
        bad_index = true;
      }
    }
    for (int j = 0; j < n; j += groups * kUnroll) {
      float v[kUnroll][V];
      float w[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int k = j + u * groups + group;  // this group's entry
        const Weight* src = ShflPointer(my_src, k & (kWarp - 1));
        w[u] = weighted ? __shfl_sync(kFullMask, my_weight, k & (kWarp - 1)) : 1.0f;
        if (k < n && src != nullptr && active) {
          Load(src + col, v[u]);
        } else {
#pragma unroll
          for (int e = 0; e < V; ++e) v[u][e] = 0.0f;
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
        for (int e = 0; e < V; ++e) sum[e] = fmaf(w[u], v[u][e], sum[e]);
      }
    }
  }
  for (int offset = lanes; offset < kWarp; offset *= 2) {
#pragma unroll
    for (int e = 0; e < V; ++e) sum[e] += __shfl_xor_sync(kFullMask, sum[e], offset);
  }
  if (group == 0 && active) {
#pragma unroll
    for (int e = 0; e < V; ++e) sum[e] *= bag.scale;
    Store(bag.out + c0 + col, sum);
  }
  return bad_index;
}

// Returns whether this lane read an index out of range.
template <int V, typename Index, typename Weight>
__device__ __forceinline__ bool PoolBag(const WarpBag<Index, Weight>& bag, int lane) {
  bool bad_index = false;
  for (int64_t c0 = 0; c0 < bag.dim; c0 += kWarp * V) {
    bad_index |=
        PoolColumns<V>(bag, c0, static_cast<int>(min(int64_t{kWarp * V}, bag.dim - c0)), lane);
  }
  return bad_index;
}

// Pools bag g into its output; with `check` (validation) returns, for the
// whole warp, whether the bag is bad: its offsets, or an index it reads.
template <typename Index, typename Weight>
__device__ __forceinline__ bool ForwardBag(const TbeArgs& args, const Index* indices,
                                           const Index* offsets, int64_t g, int lane, bool check) {
  const int t = static_cast<int>(g / args.batch_size);
  const int64_t b = g - t * args.batch_size;
  WarpBag<Index, Weight> bag;
  ReadBag(offsets, g, args.num_indices, bag.start, bag.end);
  bag.indices = indices;
  bag.per_sample_weights = args.per_sample_weights;
  bag.table = static_cast<const Weight*>(args.weights) + args.weight_offsets[t];
  bag.locations = args.locations;
  bag.slots = static_cast<const Weight*>(args.slots);
  bag.slot_stride = args.slot_stride;
  bag.out = args.out + b * args.total_dim + args.output_offsets[t];
  bag.rows = args.rows[t];
  bag.dim = args.dims[t];
  bag.scale =
      args.mean && bag.end > bag.start ? 1.0f / static_cast<float>(bag.end - bag.start) : 1.0f;
  const bool slots_aligned = bag.locations == nullptr ||
                             (bag.slot_stride % 4 == 0 &&
                              reinterpret_cast<uintptr_t>(bag.slots) % (4 * sizeof(Weight)) == 0);
  const bool vectors = bag.dim % 4 == 0 &&
                       reinterpret_cast<uintptr_t>(bag.table) % (4 * sizeof(Weight)) == 0 &&
                       reinterpret_cast<uintptr_t>(bag.out) % 16 == 0 && slots_aligned;
  const bool bad_index = vectors ? PoolBag<4>(bag, lane) : PoolBag<1>(bag, lane);
  if (!check) return false;
  const int64_t num_bags = int64_t{args.num_tables} * args.batch_size;
  const bool bad_offsets =
      CheckBagOffsets(t, b, g, num_bags, offsets[g], offsets[g + 1], args.num_indices).kind !=
      TbeFaultKind::kNone;
  return __any_sync(kFullMask, bad_index || bad_offsets);
}

// kMinBlocksPerSm blocks an SM: 32 warps, kUnroll rows in flight each.
// With `mark_bad` (validation), a bad bag is marked there as
// TbeMarkBadBagsCuda would: the smallest bad g wins. (Describing the fault
// in the grid's last block instead of a one-warp kernel after it was
// slower: every block then waits for its slowest warp and a fence.)
template <typename Index, typename Weight>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm)
    ForwardKernel(const TbeArgs args, const Index* indices, const Index* offsets,
                  unsigned long long* mark_bad) {
  const int64_t g = int64_t{blockIdx.x} * kWarpsPerBlock + threadIdx.x / kWarp;
  if (g >= int64_t{args.num_tables} * args.batch_size) return;  // the whole warp
  const int lane = threadIdx.x % kWarp;
  if (ForwardBag<Index, Weight>(args, indices, offsets, g, lane, mark_bad != nullptr) &&
      lane == 0) {
    atomicMin(mark_bad, static_cast<unsigned long long>(g));
  }
}

template <typename Index>
void LaunchForward(const TbeArgs& args, const Index* indices, const Index* offsets,
                   unsigned long long* mark_bad, cudaStream_t stream) {
  const unsigned blocks = BlocksFor(NumBags(args), "TbeForwardCuda");
  switch (args.weight_type) {
    case WeightType::kF32:
      ForwardKernel<Index, float>
          <<<blocks, kThreads, 0, stream>>>(args, indices, offsets, mark_bad);
      break;
    case WeightType::kF16:
      ForwardKernel<Index, __half>
          <<<blocks, kThreads, 0, stream>>>(args, indices, offsets, mark_bad);
      break;
    case WeightType::kBF16:
      ForwardKernel<Index, __nv_bfloat16>
          <<<blocks, kThreads, 0, stream>>>(args, indices, offsets, mark_bad);
      break;
  }
  CudaCheckLaunch("ForwardKernel", "EmbeddingBagForward");
}

}  // namespace

void TbeForwardCuda(const TbeArgs& args, unsigned long long* mark_bad, int /*device*/,
                    void* stream) {
  if (NumBags(args) == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  if (args.offsets32 != nullptr) {
    LaunchForward(args, args.indices32, args.offsets32, mark_bad, s);
  } else {
    LaunchForward(args, args.indices64, args.offsets64, mark_bad, s);
  }
}

}  // namespace ember::ops::internal
