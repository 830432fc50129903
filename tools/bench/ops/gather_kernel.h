#pragma once

// The bench's own kernels for ember-bench-ops (gather_kernel.cu): the
// batch's Zipf-distributed indices and offsets, made on the GPU; a count of
// the distinct rows a batch touches; a fill of tensors with fixed
// pseudo-random values; and the random-row gather that is the physical
// reference of the TBE forward.
//
// Layout, as the TBE's (ops/embedding_bag.h): `tables` tables of `rows` rows
// each, one after another; the indices are table-major, `per_table` =
// batch * pooling of them per table, each in [0, rows). Index is int32 or
// int64 (`index64`).
//
// Zipf indices. Index i of table t = i / per_table: u = a hash of (seed, i)
// in [0, 1); rank k = the smallest k with u < cdf[k] (a binary search in a
// table the caller built: cdf[k] = P(rank <= k), cdf[rows - 1] = 1); row =
// (k * 2654435761 + c_t) mod rows, c_t a hash of (seed, t). Multiplying by a
// prime larger than rows is a bijection on [0, rows), so the hot ranks land
// on rows spread over the table, and at different rows in every table.
//
// The gather. One warp per row: lane j loads float4 j of the row (D = 128
// f32: 32 float4, 512 bytes), kUnroll rows in flight per warp (their loads
// issued before any is used), a grid-stride loop over every lookup; row r of
// table t is weights[(t * rows + r) * dim ...]. Each thread sums what it
// loaded in registers and writes one float at the end (`sink`, one per
// thread), so the kernel's traffic is the rows read (plus 4 or 8 bytes of
// index per row) and nothing else.
//
// Every Launch* enqueues on `stream` and returns the launch's status
// (cudaGetLastError); CountDistinctRows and GatherBlocks also call the
// runtime and return its first error.
//
// Thread safety: any thread; the memory passed belongs to the caller.

#include <cstdint>

#include <cuda_runtime_api.h>

namespace ember::bench::ops_bench {

// indices[0 .. tables * per_table): Zipf over each table's rows (above).
cudaError_t LaunchZipfIndices(cudaStream_t stream, const double* cdf, int64_t rows, int tables,
                              int64_t per_table, uint64_t seed, void* indices, bool index64);

// offsets[j] = j * pooling for j in [0, bags]: bags of `pooling` lookups.
cudaError_t LaunchFixedOffsets(cudaStream_t stream, void* offsets, int64_t bags, int pooling,
                               bool index64);

// data[i] = (uniform in [-0.5, 0.5) from a hash of (seed, i)) * scale.
cudaError_t LaunchFill(cudaStream_t stream, float* data, int64_t n, uint64_t seed, float scale);

// The number of distinct (table, row) pairs of the indices, in *count (host
// memory; the call synchronizes `stream`). `marks` is device scratch of
// tables * rows bytes.
cudaError_t CountDistinctRows(cudaStream_t stream, const void* indices, bool index64,
                              int64_t per_table, int tables, int64_t rows, uint8_t* marks,
                              unsigned long long* scratch, int64_t* count);

// The unroll factors LaunchGatherRows takes.
inline constexpr int kGatherUnrolls[] = {4, 8, 16};

// Blocks of 256 threads that fill the device at full occupancy for the
// gather of `unroll` rows in flight per warp (in *blocks). The sink needs
// blocks * 256 floats.
cudaError_t GatherBlocks(int unroll, bool index64, int* blocks);

// The gather (above) of every lookup, `blocks` blocks of 256 threads.
// REQUIRES: dim % 4 == 0; weights 16-byte aligned.
cudaError_t LaunchGatherRows(cudaStream_t stream, const float* weights, const void* indices,
                             bool index64, int64_t per_table, int tables, int64_t rows, int dim,
                             int unroll, int blocks, float* sink);

}  // namespace ember::bench::ops_bench
