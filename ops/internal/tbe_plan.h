#pragma once

// What the host decides for the TBE CUDA kernels before it launches them.
// The tables' shapes are known when the op is pushed (TbeTables), and the
// batch's size when it runs, so the host picks the one kernel variant to
// launch and its chunking; the GPU never rediscovers them (the backward used
// to run a one-thread plan kernel, then launch every variant so that all but
// the planned one returned at once).
//
// Plain C++17 (the .cu files include it).
//
// Thread safety: plain values and pure functions.

#include <algorithm>
#include <cstdint>

#include "ops/internal/embedding_bag_kernels.h"

namespace ember::ops::internal {

// What the kernels need to know of the tables' shapes, computed once per
// TbeTables (TbeDeviceTables keeps it).
struct TbeTablesSummary {
  int64_t max_dim = 0;
  bool dims_multiple_of_4 = true;  // every table's dim
};

// The backward's register shapes: a lane holds `vecs` float4 registers of a
// row's gradient, so a warp holds rows of up to 128 * vecs columns.
inline constexpr int kTbeMaxVecs = static_cast<int>(kTbeBackwardCudaMaxDim / 128);

// The register shape for rows of up to `max_dim` columns: 1, 2, 4 or 8; 0
// when wider than kTbeBackwardCudaMaxDim (the push refuses such tables).
constexpr int TbeBackwardVecs(int64_t max_dim) {
  int vecs = 1;
  while (vecs <= kTbeMaxVecs && 128 * int64_t{vecs} < max_dim) vecs *= 2;
  return vecs <= kTbeMaxVecs ? vecs : 0;
}

// The backward's chunking (embedding_bag_backward_cuda.cu, step 4): the
// sorted occurrences are cut into chunks of at least kTbeMinChunk, into at
// most kTbeMaxChunks, with the partial-sum slots within kTbeSlotBudget.
inline constexpr int64_t kTbeMinChunk = 64;          // occurrences
inline constexpr int64_t kTbeMaxChunks = 32768;      // enough warps to fill an H100 several times
inline constexpr int64_t kTbeSlotBudget = 64 << 20;  // bytes of partial sums at most

struct TbeBackwardPlan {
  int vecs = 0;              // TbeBackwardVecs of the widest table
  bool vector_rows = false;  // rows move as float4: every dim % 4 == 0, pointers aligned
  int64_t chunk = 0;         // occurrences per chunk
  int64_t num_chunks = 0;
  int64_t slot_floats = 0;  // 2 slots a chunk, 128 * vecs floats each
};

// The plan for `num_indices` (> 0) occurrences. `total_dim` is the tables'
// summed dim; `aligned`: grad_output and weights are 16-byte aligned.
//
// The chunk size is the one the device plan computed, from a slot budget
// sized for the widest row total_dim allows (at most 1024 columns): the
// chunking fixes the order in which a row's partial sums are added, so
// keeping it keeps the results bit-identical to the earlier kernels. Only
// the slots the chunks use are allocated: 2 * num_chunks * 128 * vecs
// floats, never more than that budget when there are several chunks
// (num_chunks <= budget / (256 * vecs)), and a single chunk uses none.
inline TbeBackwardPlan PlanTbeBackward(const TbeTablesSummary& tables, int64_t total_dim,
                                       int64_t num_indices, bool aligned) {
  TbeBackwardPlan plan;
  plan.vecs = TbeBackwardVecs(tables.max_dim);
  plan.vector_rows = tables.dims_multiple_of_4 && aligned;
  const int64_t n = num_indices;
  const int64_t widest = std::min<int64_t>(128 * kTbeMaxVecs, (total_dim + 127) / 128 * 128);
  const int64_t budget =
      std::min<int64_t>(kTbeSlotBudget / 4, 2 * ((n + kTbeMinChunk - 1) / kTbeMinChunk) * widest);
  const int64_t target = std::min<int64_t>(
      kTbeMaxChunks, std::max<int64_t>(1, budget / (256 * int64_t{std::max(plan.vecs, 1)})));
  plan.chunk = std::max<int64_t>(kTbeMinChunk, ((n + target - 1) / target + 31) / 32 * 32);
  plan.num_chunks = (n + plan.chunk - 1) / plan.chunk;
  plan.slot_floats = 2 * plan.num_chunks * 128 * plan.vecs;
  return plan;
}

}  // namespace ember::ops::internal
