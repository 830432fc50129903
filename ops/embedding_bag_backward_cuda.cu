// TbeBackwardCuda: the backward of embedding_bag.h ("Backward") fused with
// the optimizer step, on one stream, without host syncs.
//
// Pipeline (every launch on `stream`; temporaries from the op's device
// storage manager, released after the launches and reused only after them):
//  1. Plan, on the host (ops/internal/tbe_plan.h): the register shape
//     (dims up to 128, 256, 512 or 1024), whether rows move as float4
//     (every dim % 4 == 0, pointers aligned), and the chunking below. The
//     host knows the tables' shapes, so it launches the reduce and combine
//     kernels of that one register shape only.
//  2. Build (a warp per bag): key = the index within its table (u32),
//     value = its position; the position's bag and factor w_i * s_b go to a
//     side array. Bad offsets or indices leave the sentinel key 0xffffffff
//     (from a memset), which sorts last and ends every scan. With
//     validation, the check kernels ran before (tbe_fault_cuda.cu), and a
//     batch they found bad builds nothing: every key stays a sentinel and
//     no row is updated, as the CPU leaves a bad batch.
//  3. cub::DeviceRadixSort::SortPairs on all 32 key bits. Radix sort is
//     stable and positions are table-major, so the sorted order is by
//     (index, table, position): each distinct row (index, table) is one
//     contiguous run, its occurrences in index order.
//  4. Reduce: the sorted array is cut into equal chunks (C occurrences,
//     C = N / 32768, at least 64, more when wide rows would make the
//     partial-sum slots pass 64 MiB); warps take chunks from a counter. A
//     warp walks its chunk in order, keeping the current row's gradient in
//     registers while it prefetches the next occurrences' grad_output rows,
//     and at each row change parks the finished sum in shared memory; after
//     each group of occurrences it either applies the optimizer to the
//     parked rows (a row lying wholly inside the chunk) or stores the
//     partial sum in one of the chunk's two slots (head: the row began in an
//     earlier chunk; tail: it goes on past the chunk). What an update waits
//     for (the row's slot, its Adagrad sum, its values in L1) is read ahead,
//     when the warp first reads the occurrence.
//  5. Combine: for each row that crosses a chunk boundary, the chunk where
//     it starts (its owner) sums its tail slot and the next chunks' head
//     slots with one thread block (warp w takes slots w, w + 8, ...; the
//     eight warp sums are added in warp order), then applies the optimizer.
// Instead of run-length encoding and a scan, fixed chunks give every warp
// the same number of gathers whatever the skew: a hot row is spread over
// as many warps as its length needs, a cold one costs one pass.
//
// Determinism: every row's gradient is summed in an order fixed by the
// batch (sequentially within a chunk, chunk partials in chunk order), the
// chunking depends only on N and the dims, and warp shuffles reduce in a
// fixed tree: results are bit-identical run to run, with or without
// options.deterministic (which therefore changes nothing here). Sums are f32,
// so they differ from the CPU kernel's f64 sums by f32 rounding.
//
// Speed (H100, dim 128, Zipf indices, EmbeddingBagBackwardCudaBenchmark):
// 8 tables x 1M rows, B 16k, pooling 20: 1.6 / 2.0 / 3.2 ms a step with
// SGD / row-wise Adagrad / Adam; 32 x 500k rows, B 64k, pooling 80: 49 / 60
// / 85 ms, where reading grad_output once per lookup (86 GB) dominates.
// PyTorch 2.11 (an nn.EmbeddingBag per table, its best optimizer variant)
// took 4.3 / 27 / 19 ms and 205 / 236 / 218 ms. Parking and reading ahead
// then took ember-bench-ops' 8x20x16384 from 1.75 / 2.24 ms (SGD / Adagrad)
// to 1.03 / 1.08 ms on an H200 (docs/benchmarks.md).
//
// Limits: dims up to kTbeBackwardCudaMaxDim = 1024 (the push functions
// refuse a wider table on a GPU), tables of up to kTbeBackwardCudaMaxRows =
// 2^32 - 1 rows (refused likewise: a larger index would read as a bad
// entry), fewer than 2^31 indices and 2^32 bags (checked below).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <cub/device/device_radix_sort.cuh>

#include "engine/error.h"
#include "ops/internal/cuda_launch.cuh"
#include "ops/internal/embedding_bag_fault.h"
#include "ops/internal/embedding_bag_kernels.h"
#include "ops/internal/tbe_plan.h"
#include "storage/storage_manager.h"

namespace ember::ops::internal {
namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr uint32_t kSentinelKey = 0xffffffffu;
constexpr unsigned long long kSentinelRow = ~0ull;
constexpr int kReduceThreads = 128;
constexpr int kCombineWarps = 8;

// The chunks warps take next (zeroed by a memset before the reduce).
struct WorkCounters {
  unsigned long long next_reduce;
  unsigned long long next_combine;
};

// Where position i's gradient comes from: bag g = t * B + b and w_i * s_b.
struct alignas(8) Contribution {
  uint32_t bag;
  float scale;
};

struct Params {
  TbeArgs args;
  TbeBackwardPlan plan;
  WorkCounters* counters;
  const uint32_t* keys;       // sorted
  const uint32_t* positions;  // sorted along
  const Contribution* contributions;
  float* slots;  // 2 per chunk, 128 * vecs floats each (lane layout)
  float bias1;   // Adam: 1 - beta1^step
  float bias2;
};

__device__ int64_t IndexAt(const TbeArgs& a, int64_t i) {
  return a.indices32 != nullptr ? a.indices32[i] : a.indices64[i];
}
__device__ int64_t OffsetAt(const TbeArgs& a, int64_t i) {
  return a.offsets32 != nullptr ? a.offsets32[i] : a.offsets64[i];
}

// `skip_if_bad`: null, or the check kernels' verdict (kTbeNoBadBag: build).
__global__ void BuildKernel(TbeArgs a, const unsigned long long* skip_if_bad, uint32_t* keys,
                            uint32_t* positions, Contribution* contributions) {
  if (skip_if_bad != nullptr && *skip_if_bad != kTbeNoBadBag) return;  // a bad batch: no update
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t{gridDim.x} * blockDim.x / 32;
  const int64_t num_bags = a.num_tables * a.batch_size;
  for (int64_t g = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32; g < num_bags;
       g += warps) {
    const int64_t t = g / a.batch_size;
    const int64_t start = OffsetAt(a, g);
    const int64_t end = OffsetAt(a, g + 1);
    if (start < 0 || end < start || end > a.num_indices) continue;  // skipped: keys stay sentinel
    const int64_t rows = min(a.rows[t], int64_t{kSentinelKey});
    const float bag_scale = a.mean ? 1.0f / static_cast<float>(end - start) : 1.0f;
    for (int64_t i = start + lane; i < end; i += 32) {
      const int64_t index = IndexAt(a, i);
      keys[i] = index >= 0 && index < rows ? static_cast<uint32_t>(index) : kSentinelKey;
      positions[i] = static_cast<uint32_t>(i);
      const float weight = a.per_sample_weights != nullptr ? a.per_sample_weights[i] : 1.0f;
      contributions[i] = {static_cast<uint32_t>(g), weight * bag_scale};
    }
  }
}

// The row at sorted position j: (index << 32) | table, which never
// decreases along the sorted array; kSentinelRow for a bad entry.
__device__ unsigned long long RowAt(const Params& p, int64_t j) {
  const uint32_t key = p.keys[j];
  if (key == kSentinelKey) return kSentinelRow;
  const uint32_t bag = p.contributions[p.positions[j]].bag;
  return (static_cast<unsigned long long>(key) << 32) |
         (bag / static_cast<uint32_t>(p.args.batch_size));
}

// A lane's share of a row: 4 * kVecs columns. With float4 rows, register
// 4v + c is column 128v + 4 lane + c; otherwise 128v + 32c + lane (so that
// scalar accesses coalesce too).
__device__ int Column(bool vector_rows, int v, int c, int lane) {
  return vector_rows ? 128 * v + 4 * lane + c : 128 * v + 32 * c + lane;
}

template <int kVecs>
__device__ void LoadGrad(const float* src, int64_t dim, bool vector_rows, int lane,
                         float (&x)[4 * kVecs]) {
#pragma unroll
  for (int v = 0; v < kVecs; ++v) {
    if (vector_rows) {
      const int col = Column(true, v, 0, lane);
      const float4 f = col < dim ? __ldg(reinterpret_cast<const float4*>(src + col))
                                 : make_float4(0.f, 0.f, 0.f, 0.f);
      x[4 * v] = f.x, x[4 * v + 1] = f.y, x[4 * v + 2] = f.z, x[4 * v + 3] = f.w;
    } else {
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int col = Column(false, v, c, lane);
        x[4 * v + c] = col < dim ? __ldg(src + col) : 0.0f;
      }
    }
  }
}

// Slots hold a lane's registers in lane layout: float4 number 32v + lane.
template <int kVecs>
__device__ void StoreSlot(float* slot, int lane, const float (&x)[4 * kVecs]) {
#pragma unroll
  for (int v = 0; v < kVecs; ++v) {
    reinterpret_cast<float4*>(slot)[32 * v + lane] =
        make_float4(x[4 * v], x[4 * v + 1], x[4 * v + 2], x[4 * v + 3]);
  }
}

template <int kVecs>
__device__ void AddSlot(const float* slot, int lane, float (&x)[4 * kVecs]) {
#pragma unroll
  for (int v = 0; v < kVecs; ++v) {
    const float4 f = reinterpret_cast<const float4*>(slot)[32 * v + lane];
    x[4 * v] += f.x, x[4 * v + 1] += f.y, x[4 * v + 2] += f.z, x[4 * v + 3] += f.w;
  }
}

template <typename W>
__device__ float LoadWeight(const W* w, int64_t i);
template <>
__device__ float LoadWeight(const float* w, int64_t i) {
  return w[i];
}
template <>
__device__ float LoadWeight(const __half* w, int64_t i) {
  return __half2float(w[i]);
}
template <>
__device__ float LoadWeight(const __nv_bfloat16* w, int64_t i) {
  return __bfloat162float(w[i]);
}

__device__ void StoreWeight(float* w, int64_t i, float x) { w[i] = x; }
__device__ void StoreWeight(__half* w, int64_t i, float x) { w[i] = __float2half_rn(x); }
__device__ void StoreWeight(__nv_bfloat16* w, int64_t i, float x) { w[i] = __float2bfloat16_rn(x); }

// The optimizer on one element, e its index in the weights (and Adam's
// state); the same expressions as the CPU kernel's ApplyOptimizer.
__device__ float UpdateElement(const Params& p, float w, float g, float denom, int64_t e) {
  const TbeArgs& a = p.args;
  switch (a.optimizer) {
    case OptimizerKind::kSgd:
      return w - a.learning_rate * g;
    case OptimizerKind::kRowwiseAdagrad:
      return w - a.learning_rate * g / denom;
    case OptimizerKind::kAdam:
      break;
  }
  const float m = a.beta1 * a.adam_m[e] + (1.0f - a.beta1) * g;
  const float v = a.beta2 * a.adam_v[e] + (1.0f - a.beta2) * g * g;
  a.adam_m[e] = m;
  a.adam_v[e] = v;
  const float m_hat = m / p.bias1;
  const float v_hat = v / p.bias2;
  return w - a.learning_rate * (m_hat / (sqrtf(v_hat) + a.eps) + a.weight_decay * w);
}

// Where a row's update goes, read ahead of it: kHome or its cache slot
// (the location of one of its occurrences, TbeArgs::locations), and its
// row-wise Adagrad sum (indexed by the row wherever its values are).
constexpr int32_t kHome = -1;

struct RowTarget {
  int32_t slot = kHome;
  float accumulated = 0.0f;
};

template <typename W>
__device__ W* RowValues(const TbeArgs& a, unsigned long long row, int32_t slot) {
  const int t = static_cast<int>(row & 0xffffffffu);
  const int64_t index = static_cast<int64_t>(row >> 32);
  return slot == kHome ? static_cast<W*>(a.weights) + a.weight_offsets[t] + index * a.dims[t]
                       : static_cast<W*>(a.slots) + slot * a.slot_stride;
}

// The target of `row`, whose occurrence is at sorted position
// `occurrence`; also asks L1 for the row's values, which its update will
// read a while later.
template <typename W>
__device__ RowTarget TargetAt(const Params& p, unsigned long long row, int64_t occurrence) {
  const TbeArgs& a = p.args;
  const int t = static_cast<int>(row & 0xffffffffu);
  RowTarget target;
  if (a.locations != nullptr) {
    const int32_t slot = a.locations[p.positions[occurrence]];
    if (slot >= 0) target.slot = slot;
  }
  if (a.optimizer == OptimizerKind::kRowwiseAdagrad) {
    target.accumulated = a.accumulator[a.row_offsets[t] + static_cast<int64_t>(row >> 32)];
  }
  const auto begin = reinterpret_cast<uintptr_t>(RowValues<W>(a, row, target.slot));
  const uintptr_t end = begin + static_cast<uintptr_t>(a.dims[t]) * sizeof(W);
  for (uintptr_t line = begin & ~uintptr_t{127}; line < end; line += 128) {
    asm volatile("prefetch.global.L1 [%0];" ::"l"(line));
  }
  return target;
}

// Applies the optimizer to `row` (RowAt's form) with gradient g, a warp's
// registers; called by all 32 lanes. A chunk's rows are applied one after
// another, so what each waits for was read ahead (TargetAt): the slot and
// the Adagrad sum in registers, the values in L1. (Adam's moments are read
// here: an earlier version that loaded the whole row and its state into
// registers first was measured slower on an H100, for occupancy.)
template <typename W, int kVecs>
__device__ void ApplyRow(const Params& p, bool vector_rows, unsigned long long row,
                         RowTarget target, const float (&g)[4 * kVecs]) {
  const TbeArgs& a = p.args;
  const int lane = threadIdx.x % 32;
  const int t = static_cast<int>(row & 0xffffffffu);
  const int64_t index = static_cast<int64_t>(row >> 32);
  const int64_t dim = a.dims[t];
  const int64_t first = a.weight_offsets[t] + index * dim;
  W* values = RowValues<W>(a, row, target.slot);
  if (lane == 0 && target.slot != kHome && a.slot_dirty != nullptr) a.slot_dirty[target.slot] = 1;
  float w[4 * kVecs];
#pragma unroll
  for (int i = 0; i < 4 * kVecs; ++i) {
    const int col = Column(vector_rows, i / 4, i % 4, lane);
    w[i] = col < dim ? LoadWeight<W>(values, col) : 0.0f;
  }
  float denom = 0.0f;
  if (a.optimizer == OptimizerKind::kRowwiseAdagrad) {
    float square_sum = 0.0f;  // columns past dim hold 0
#pragma unroll
    for (int i = 0; i < 4 * kVecs; ++i) square_sum += g[i] * g[i];
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
      square_sum += __shfl_xor_sync(kFullMask, square_sum, offset);
    }
    const float value = target.accumulated + square_sum / static_cast<float>(dim);
    if (lane == 0) a.accumulator[a.row_offsets[t] + index] = value;
    denom = sqrtf(value) + a.eps;
  }
#pragma unroll
  for (int i = 0; i < 4 * kVecs; ++i) {
    const int col = Column(vector_rows, i / 4, i % 4, lane);
    if (col >= dim) continue;
    StoreWeight(values + col, 0, UpdateElement(p, w[i], g[i], denom, first + col));
  }
}

template <int kVecs>
__device__ void Zero(float (&x)[4 * kVecs]) {
#pragma unroll
  for (int i = 0; i < 4 * kVecs; ++i) x[i] = 0.0f;
}

// Grad rows in flight per lane.
template <int kVecs>
constexpr int kUnrollOf = kVecs >= 8 ? 1 : 8 / kVecs;

// A finished piece of a chunk: one row's gradient summed over a run of its
// occurrences, parked in shared memory until the warp's group of kUnroll
// occurrences is done, then applied (or stored in a chunk slot) by one
// copy of that code. Applying at the row change itself put a copy of
// ApplyRow in each of the kUnroll unrolled steps, and the kernel spent most
// of its stalls waiting for instructions (ncu, H200).
struct Piece {
  unsigned long long row;
  RowTarget target;
  int32_t where;  // kApply, or the chunk's slot: 0 head, 1 tail
};
constexpr int32_t kApply = -1;

template <int kVecs>
struct ParkedPieces {                         // one warp's
  float4 sums[kUnrollOf<kVecs>][32 * kVecs];  // lane layout (StoreSlot)
  Piece pieces[kUnrollOf<kVecs>];
};

// Applies (or stores) the pieces parked in `park`; called by all 32 lanes.
template <typename W, int kVecs>
__device__ void DrainPieces(const Params& p, bool vector_rows, int64_t k,
                            const ParkedPieces<kVecs>& park, int parked) {
  const int lane = threadIdx.x % 32;
  __syncwarp();  // lane 0's piece records are visible
#pragma unroll 1
  for (int q = 0; q < parked; ++q) {
    const Piece piece = park.pieces[q];
    float sum[4 * kVecs];
    Zero<kVecs>(sum);
    AddSlot<kVecs>(reinterpret_cast<const float*>(park.sums[q]), lane, sum);
    if (piece.where == kApply) {
      ApplyRow<W, kVecs>(p, vector_rows, piece.row, piece.target, sum);
    } else {
      StoreSlot<kVecs>(p.slots + (2 * k + piece.where) * 128 * kVecs, lane, sum);
    }
  }
  __syncwarp();  // read before the warp parks again
}

// One warp's chunk k (see the top comment, step 4).
template <typename W, int kVecs>
__device__ void ReduceChunk(const Params& p, const TbeBackwardPlan& plan, int64_t k,
                            ParkedPieces<kVecs>& park) {
  constexpr int kUnroll = kUnrollOf<kVecs>;
  const TbeArgs& a = p.args;
  const int lane = threadIdx.x % 32;
  const bool vector_rows = plan.vector_rows;
  const int64_t c0 = k * plan.chunk;
  const int64_t c1 = min(c0 + plan.chunk, a.num_indices);
  // The rows around the chunk's two edges, one lane each.
  unsigned long long edge = kSentinelRow;
  if ((lane == 0 && k > 0) || lane == 1 || lane == 2 || (lane == 3 && c1 < a.num_indices)) {
    edge = RowAt(p, lane == 0 ? c0 - 1 : lane == 1 ? c0 : lane == 2 ? c1 - 1 : c1);
  }
  const unsigned long long before = __shfl_sync(kFullMask, edge, 0);
  const unsigned long long first = __shfl_sync(kFullMask, edge, 1);
  const unsigned long long last = __shfl_sync(kFullMask, edge, 2);
  const unsigned long long after = __shfl_sync(kFullMask, edge, 3);
  const bool head_continues = first != kSentinelRow && before == first;
  const bool tail_continues = last != kSentinelRow && after == last;

  float acc[4 * kVecs];
  Zero<kVecs>(acc);
  unsigned long long current = kSentinelRow;
  RowTarget current_target;
  int64_t piece_start = c0;
  int parked = 0;
  auto finish_piece = [&](int64_t piece_end) {
    const bool from_before = piece_start == c0 && head_continues;
    const bool goes_on = piece_end == c1 && tail_continues;
    StoreSlot<kVecs>(reinterpret_cast<float*>(park.sums[parked]), lane, acc);
    if (lane == 0) {
      park.pieces[parked] = {current, current_target, from_before ? 0 : goes_on ? 1 : kApply};
    }
    ++parked;
  };
  for (int64_t base = c0; base < c1; base += 32) {
    // Lane-parallel: each lane fetches one occurrence's row, source, factor
    // and target (ahead of the row's update, which would wait for it).
    unsigned long long row = kSentinelRow;
    long long source = 0;  // of its grad_output row
    long long dim = 0;
    float scale = 0.0f;
    RowTarget target;
    if (base + lane < c1) {
      const uint32_t key = p.keys[base + lane];
      if (key != kSentinelKey) {
        const Contribution cb = p.contributions[p.positions[base + lane]];
        const uint32_t t = cb.bag / static_cast<uint32_t>(a.batch_size);
        row = (static_cast<unsigned long long>(key) << 32) | t;
        source = (cb.bag - int64_t{t} * a.batch_size) * a.total_dim + a.output_offsets[t];
        dim = a.dims[t];
        scale = cb.scale;
        target = TargetAt<W>(p, row, base + lane);
      }
    }
    const int count = static_cast<int>(min(int64_t{32}, c1 - base));
    for (int u0 = 0; u0 < count; u0 += kUnroll) {
      float g[kUnroll][4 * kVecs];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int src = (u0 + u) % 32;
        const unsigned long long r = __shfl_sync(kFullMask, row, src);
        const long long from = __shfl_sync(kFullMask, source, src);
        const long long d = __shfl_sync(kFullMask, dim, src);
        if (u0 + u < count && r != kSentinelRow) {
          LoadGrad<kVecs>(a.grad_output + from, d, vector_rows, lane, g[u]);
        } else {
          Zero<kVecs>(g[u]);
        }
      }
      bool ended = false;  // sentinels sort last: nothing follows one
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (u0 + u >= count) break;
        const unsigned long long r = __shfl_sync(kFullMask, row, u0 + u);
        const float s = __shfl_sync(kFullMask, scale, u0 + u);
        const int32_t r_slot = __shfl_sync(kFullMask, target.slot, u0 + u);
        const float r_accumulated = __shfl_sync(kFullMask, target.accumulated, u0 + u);
        if (r != current) {
          if (current != kSentinelRow) finish_piece(base + u0 + u);
          current = r;
          current_target = {r_slot, r_accumulated};
          piece_start = base + u0 + u;
          Zero<kVecs>(acc);
        }
        if (r == kSentinelRow) {
          ended = true;
          break;
        }
#pragma unroll
        for (int i = 0; i < 4 * kVecs; ++i) acc[i] += s * g[u][i];
      }
      DrainPieces<W, kVecs>(p, vector_rows, k, park, parked);
      parked = 0;
      if (ended) return;
    }
  }
  if (current != kSentinelRow) {
    finish_piece(c1);
    DrainPieces<W, kVecs>(p, vector_rows, k, park, parked);
  }
}

template <typename W, int kVecs>
__global__ void __launch_bounds__(kReduceThreads) ReduceKernel(Params p) {
  __shared__ ParkedPieces<kVecs> parked[kReduceThreads / 32];
  const TbeBackwardPlan& plan = p.plan;
  const int lane = threadIdx.x % 32;
  for (;;) {
    unsigned long long k = 0;
    if (lane == 0) k = atomicAdd(&p.counters->next_reduce, 1ull);
    k = __shfl_sync(kFullMask, k, 0);
    if (k >= static_cast<unsigned long long>(plan.num_chunks)) return;
    ReduceChunk<W, kVecs>(p, plan, static_cast<int64_t>(k), parked[threadIdx.x / 32]);
  }
}

// For chunk k (by warp 0): 0 unless k owns a row crossing its end; then
// that row and its number of slots (k's tail, then the heads of the chunks
// up to the last one it reaches).
__device__ int64_t OwnedSlots(const Params& p, const TbeBackwardPlan& plan, int64_t k,
                              unsigned long long* row) {
  const int lane = threadIdx.x % 32;
  const int64_t c0 = k * plan.chunk;
  const int64_t c1 = c0 + plan.chunk;
  if (c1 >= p.args.num_indices) return 0;
  unsigned long long edge = kSentinelRow;
  if ((lane == 0 && k > 0) || lane == 1 || lane == 2) {
    edge = RowAt(p, lane == 0 ? c0 - 1 : lane == 1 ? c1 - 1 : c1);
  }
  const unsigned long long before = __shfl_sync(kFullMask, edge, 0);
  *row = __shfl_sync(kFullMask, edge, 1);
  const unsigned long long after = __shfl_sync(kFullMask, edge, 2);
  if (*row == kSentinelRow || after != *row || before == *row) return 0;
  // The last chunk starting with the row: rows never decrease, so the
  // chunks starting with it are a prefix of k + 1, k + 2, ...; narrow it
  // 32 probes at a time. Invariant: chunk lo starts with it, none from hi.
  int64_t lo = k + 1;
  int64_t hi = plan.num_chunks;
  while (hi - lo > 1) {
    const int64_t step = (hi - lo + 31) / 32;
    const int64_t j = lo + (lane + 1) * step;
    const bool same = j < hi && RowAt(p, j * plan.chunk) == *row;
    const int64_t ones = __popc(__ballot_sync(kFullMask, same));
    hi = min(hi, lo + (ones + 1) * step);
    lo += ones * step;
  }
  return lo - k + 1;
}

template <typename W, int kVecs>
__global__ void __launch_bounds__(32 * kCombineWarps) CombineKernel(Params p) {
  const TbeBackwardPlan& plan = p.plan;
  __shared__ float4 sums[kCombineWarps][32 * kVecs];
  __shared__ long long chunk;
  __shared__ long long slots;
  __shared__ unsigned long long owned_row;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int64_t stride = 128 * kVecs;
  for (;;) {
    if (threadIdx.x == 0) {
      chunk = static_cast<long long>(atomicAdd(&p.counters->next_combine, 1ull));
    }
    __syncthreads();
    const int64_t k = chunk;
    if (k >= plan.num_chunks) return;
    if (warp == 0) {
      unsigned long long row = kSentinelRow;
      const int64_t n = OwnedSlots(p, plan, k, &row);
      if (lane == 0) slots = n, owned_row = row;
    }
    __syncthreads();
    const int64_t n = slots;
    if (n > 0) {
      float g[4 * kVecs];
      Zero<kVecs>(g);
#pragma unroll 4
      for (int64_t q = warp; q < n; q += kCombineWarps) {  // k's tail, then heads of k+1..
        AddSlot<kVecs>(p.slots + (q == 0 ? 2 * k + 1 : 2 * (k + q)) * stride, lane, g);
      }
      StoreSlot<kVecs>(reinterpret_cast<float*>(sums[warp]), lane, g);
      __syncthreads();
      if (warp == 0) {
        Zero<kVecs>(g);
        for (int w = 0; w < kCombineWarps; ++w) {
          AddSlot<kVecs>(reinterpret_cast<const float*>(sums[w]), lane, g);
        }
        const int64_t occurrence = (k + 1) * plan.chunk - 1;
        ApplyRow<W, kVecs>(p, plan.vector_rows, owned_row, TargetAt<W>(p, owned_row, occurrence),
                           g);
      }
    }
    __syncthreads();  // `chunk`, `slots` and `sums` are reused
  }
}

// One allocation for every temporary, carved in 256-byte-aligned pieces.
class Carver {
 public:
  explicit Carver(char* base) : base_(base) {}
  template <typename T>
  T* Take(std::size_t count) {
    T* at = reinterpret_cast<T*>(base_ == nullptr ? nullptr : base_ + used_);
    used_ += (count * sizeof(T) + 255) / 256 * 256;
    return at;
  }
  [[nodiscard]] std::size_t used() const { return used_; }

 private:
  char* base_;
  std::size_t used_ = 0;
};

struct Temporaries {
  WorkCounters* counters;
  uint32_t* keys[2];
  uint32_t* positions[2];
  Contribution* contributions;
  void* sort_temp;
  std::size_t sort_bytes;
  float* slots;
  int64_t slot_floats;
};

// Carves every temporary from `carver` (a null base only measures).
Temporaries Carve(Carver& carver, int64_t n, std::size_t sort_bytes, int64_t slot_floats) {
  Temporaries tmp{};
  tmp.counters = carver.Take<WorkCounters>(1);
  for (int i = 0; i < 2; ++i) tmp.keys[i] = carver.Take<uint32_t>(n);
  for (int i = 0; i < 2; ++i) tmp.positions[i] = carver.Take<uint32_t>(n);
  tmp.contributions = carver.Take<Contribution>(n);
  tmp.sort_bytes = sort_bytes;
  tmp.sort_temp = carver.Take<char>(sort_bytes);
  tmp.slot_floats = slot_floats;
  tmp.slots = carver.Take<float>(slot_floats);
  return tmp;
}

// The reduce and combine kernels of the planned register shape, alone.
template <typename W, int kVecs>
void LaunchShape(const Params& params, int sms, cudaStream_t stream, const char* op) {
  ReduceKernel<W, kVecs><<<sms * 16, kReduceThreads, 0, stream>>>(params);
  CudaCheckLaunch("ReduceKernel", op);
  // Blocks take chunks in turn, and most chunks own no crossing row: a
  // check of a few dependent loads each. With 2 blocks an SM they were
  // ~100 us of an H200's backward at 426k lookups.
  CombineKernel<W, kVecs><<<sms * 8, 32 * kCombineWarps, 0, stream>>>(params);
  CudaCheckLaunch("CombineKernel", op);
}

template <typename W>
void LaunchUpdates(const Params& params, int sms, cudaStream_t stream, const char* op) {
  switch (params.plan.vecs) {
    case 1:
      return LaunchShape<W, 1>(params, sms, stream, op);
    case 2:
      return LaunchShape<W, 2>(params, sms, stream, op);
    case 4:
      return LaunchShape<W, 4>(params, sms, stream, op);
    case 8:
      return LaunchShape<W, 8>(params, sms, stream, op);
    default:  // the push refuses wider tables; a plan without a shape is a bug
      throw InvalidArgument(std::string("[") + op + "] no register shape for rows of this width");
  }
}

// 1 - beta^step, as the CPU kernel computes it.
float BiasCorrection(float beta, int64_t step) {
  return static_cast<float>(1.0 - std::pow(static_cast<double>(beta), static_cast<double>(step)));
}

}  // namespace

void TbeBackwardCuda(const TbeArgs& args, const TbeBackwardPlan& plan,
                     const unsigned long long* skip_if_bad, storage::StorageManager& memory,
                     int device, void* stream_handle) {
  const char* op = TbeOpName(args);
  const int64_t n = args.num_indices;
  const int64_t num_bags = args.num_tables * args.batch_size;
  if (n == 0 || num_bags == 0) return;
  if (plan.vecs != 1 && plan.vecs != 2 && plan.vecs != 4 && plan.vecs != 8) {
    // The push refuses tables wider than kTbeBackwardCudaMaxDim: a bug.
    throw InvalidArgument(std::string("[") + op + "] the plan has no register shape (" +
                          std::to_string(plan.vecs) + " float4 a lane)");
  }
  if (n > INT32_MAX || num_bags >= int64_t{1} << 32) {
    throw InvalidArgument(std::string("[") + op + "] " + std::to_string(n) + " indices in " +
                          std::to_string(num_bags) +
                          " bags: the CUDA kernel takes at most 2^31 - 1 indices and 2^32 - 1 "
                          "bags");
  }
  const cudaStream_t stream = AsStream(stream_handle);
  int sms = 0;
  CudaCheckForOp(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
                 "cudaDeviceGetAttribute", op);

  cub::DoubleBuffer<uint32_t> keys(nullptr, nullptr);
  cub::DoubleBuffer<uint32_t> positions(nullptr, nullptr);
  std::size_t sort_bytes = 0;
  CudaCheckForOp(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, keys, positions,
                                                 static_cast<int>(n), 0, 32, stream),
                 "cub::DeviceRadixSort::SortPairs (size)", op);
  // Slots: two per chunk of the planned width (tbe_plan.h).
  Carver measure(nullptr);
  Carve(measure, n, sort_bytes, plan.slot_floats);
  storage::Buffer buffer = memory.Alloc(measure.used(), stream);
  Carver carver(static_cast<char*>(buffer.data()));
  const Temporaries tmp = Carve(carver, n, sort_bytes, plan.slot_floats);

  CudaCheckForOp(cudaMemsetAsync(tmp.keys[0], 0xff, n * sizeof(uint32_t), stream),
                 "cudaMemsetAsync of the keys", op);
  CudaCheckForOp(cudaMemsetAsync(tmp.counters, 0, sizeof(WorkCounters), stream),
                 "cudaMemsetAsync of the work counters", op);
  const auto build_blocks = static_cast<unsigned>(std::min<int64_t>((num_bags + 7) / 8, sms * 32));
  BuildKernel<<<build_blocks, 256, 0, stream>>>(args, skip_if_bad, tmp.keys[0], tmp.positions[0],
                                                tmp.contributions);
  CudaCheckLaunch("BuildKernel", op);

  keys = cub::DoubleBuffer<uint32_t>(tmp.keys[0], tmp.keys[1]);
  positions = cub::DoubleBuffer<uint32_t>(tmp.positions[0], tmp.positions[1]);
  std::size_t temp_bytes = tmp.sort_bytes;
  CudaCheckForOp(cub::DeviceRadixSort::SortPairs(tmp.sort_temp, temp_bytes, keys, positions,
                                                 static_cast<int>(n), 0, 32, stream),
                 "cub::DeviceRadixSort::SortPairs", op);

  Params params{
      args,      plan, tmp.counters, keys.Current(), positions.Current(), tmp.contributions,
      tmp.slots, 1.0f, 1.0f};
  if (args.optimizer == OptimizerKind::kAdam) {
    params.bias1 = BiasCorrection(args.beta1, args.step);
    params.bias2 = BiasCorrection(args.beta2, args.step);
  }
  switch (args.weight_type) {
    case WeightType::kF32:
      LaunchUpdates<float>(params, sms, stream, op);
      break;
    case WeightType::kF16:
      LaunchUpdates<__half>(params, sms, stream, op);
      break;
    case WeightType::kBF16:
      LaunchUpdates<__nv_bfloat16>(params, sms, stream, op);
      break;
  }
  // `buffer` goes back to the manager here, fenced after the launches above.
}

}  // namespace ember::ops::internal
