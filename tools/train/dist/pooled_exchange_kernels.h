#pragma once

// The kernels behind PooledExchange on a GPU (pooled_exchange.h), over a
// ShardLayout::ColumnPlan in device memory. Each launches on `stream` (a
// cudaStream_t) and returns; throws CudaError if the launch fails, or
// Unavailable in a build without CUDA.
//
// Thread safety: reentrant.

#include <cstdint>

namespace ember::train {

// ShardLayout::ColumnPlan's arrays in device memory.
struct DeviceColumnPlan {
  const int32_t* first_column;   // [ranks + 1]
  const int32_t* owner;          // [columns]
  const int32_t* out_column;     // [columns]
  const int32_t* sources_begin;  // [total_dim + 1]
  const int32_t* sources;        // [columns]
  int ranks;
  int64_t columns;  // W
  int64_t total_dim;
  int64_t local_batch;
  // Every table's dim is a multiple of 4, so columns go in fours that stay
  // together in both layouts (the kernels then move four at a time).
  bool by_four;
};

// out[b, c] = the sum, in rank order, of the exchanged columns of c (the
// first copied); `received` is the owners' blocks.
void LaunchUnpackPooled(const DeviceColumnPlan& plan, const float* received, float* out,
                        void* stream);
// send's owner blocks from the gradient rows `grads` [B_l, total_dim].
void LaunchPackGrads(const DeviceColumnPlan& plan, const float* grads, float* send, void* stream);

}  // namespace ember::train
