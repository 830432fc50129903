#pragma once

// Table-batched embedding bags (TBE), as FBGEMM's
// SplitTableBatchedEmbeddingBags: T tables looked up in one op, and a
// backward pass fused with the optimizer step.
//
// Layout.
//  - weights: one 1-D tensor holding every table, table after table, each
//    row-major (rows[t] x dims[t]); f32, or f16/bf16 storage with f32
//    arithmetic. TbeTables gives where each table starts.
//  - indices: 1-D i32 or i64, every table's indices one after another.
//  - offsets: 1-D, the indices' dtype, T * B + 1 entries, table-major:
//    bag b of table t is indices[offsets[t*B + b] .. offsets[t*B + b + 1]).
//    offsets[0] == 0, non-decreasing, offsets[T*B] == indices.numel().
//  - per_sample_weights (optional): 1-D f32, one per index; each looked-up
//    row is scaled by its weight before pooling.
//  - out / grad_output: [B, total_dim] f32; table t's pooled bag b is
//    out[b, output_offset(t) .. output_offset(t) + dims[t]).
// Every tensor of one op lives on one context (the CPU, or one GPU); the op
// runs there: kNormal on the CPU workers or the GPU's normal workers.
//
// Validation. An index outside [0, rows[t]) or an offset that is out of
// range, decreasing, or does not start at 0 / end at indices.numel() is an
// InvalidArgument naming the table, the bag and the value, e.g.
// "[EmbeddingBagForward] table 2, bag 17: index 1000 is out of range
// [0, 1000) (indices[523])" (the first bad bag in (table, bag) order). Bad
// entries are never read or written out of bounds, whatever the options.
//  - CPU: the kernels check as they go; the op fails when it runs.
//  - GPU with options.validate (the default): the kernels mark bad bags on
//    the op's stream (the forward as it reads each entry, the backward in a
//    pass before it updates anything) and leave the first fault in a
//    record that the host reads
//    once the op's GPU work is done, so that no worker waits for the GPU
//    (engine.h, OnComplete::WithCheck). The error reaches the caller at the
//    latest at the next wait on the op's outputs: WaitForVar on one
//    (Tensor::WaitToRead), a CPU op reading one (skipped; the error passes
//    on to what it writes), or WaitForAll. In the plain engines, which sync
//    each GPU op's stream, the op fails as it completes. GPU ops that read
//    the outputs before the error is known run on them (they are not
//    skipped): wait on an output before trusting what a GPU op made of it.
//    A forward on a bad batch fills `out` as without validation; a backward
//    on a bad batch changes no weight and no optimizer state (as the CPU).
//  - GPU without options.validate: bad entries are skipped and nothing is
//    reported.
//  - ValidateTbeBatch checks a batch on the host. For batches made on the
//    host (a data loader's), that is where validation belongs: one pass
//    over memory the host has just written, before the upload, and the GPU
//    ops then run with validate = false.
//
// GPU memory. The tables' per-table arrays are copied to a GPU once per
// TbeTables, by the first op that runs there, and kept while the TbeTables
// (or a copy of it, or an op pushed with it) lives. Temporaries (the
// backward's sort buffers, the validation's fault record) come from
// options.device_memory and options.pinned_memory, by default the
// process-wide managers of the op's GPU and of pinned memory fenced on that
// GPU; the tables' copy comes from the device manager of the first op that
// needs it there.
//
// Backward. For every distinct row r of table t in the batch,
//   g_r = sum over its occurrences i (in bag b) of w_i * s_b * grad_output[b, t's columns]
// where w_i is the per-sample weight (1 without) and s_b is 1 (sum) or
// 1 / |bag b| (mean). Each distinct row is updated once per step with g_r:
//   SGD:              W[r] -= lr * g_r
//   row-wise Adagrad: a[r] += mean(g_r^2);  W[r] -= lr * g_r / (sqrt(a[r]) + eps)
//   Adam:             m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
//                     W[r] -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
//                     (+ lr * weight_decay * W[r]); rows not in the batch keep
//                     their state (lazy Adam, as FBGEMM's)
// Rows are found by sorting the batch's (row, position) pairs (stably, CUB's
// radix sort on the GPU). The GPU cuts the sorted pairs into equal chunks
// that warps take in turn; a row inside a chunk is updated there, a hot row
// spanning chunks is summed by one block in chunk order. No atomics touch
// the sums, so every kernel, CPU and GPU, gives bit-identical results run to
// run whatever `deterministic` says: the option asks for what is always
// given (kept so that callers can state the requirement). On a GPU the
// backward takes dims up to 1024 (its reduce holds a row's gradient in
// registers) and tables of up to 2^32 - 1 rows (it sorts 32-bit keys): a
// push with a wider or longer table throws InvalidArgument naming the op,
// the table and its dim or rows. The CPU takes any.
//
// Thread safety: the push functions are thread-safe (they push engine ops).
// The tensors must stay alive until the pushed op has run (a Tensor's
// deletion is deferred through the engine, so destroying it is safe); the
// TbeTables need not (the op shares its arrays).

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/context.h"
#include "storage/storage_manager.h"
#include "storage/tensor.h"

namespace ember::ops {

using storage::Tensor;

namespace internal {
class TbeDeviceTables;
struct TbeTablesAccess;
}  // namespace internal

// The shape of a TBE: table t has rows[t] rows of dims[t] elements. Copies
// share the arrays the kernels read and their GPU copies (see "GPU
// memory"). Const methods may run concurrently, also with ops that use it.
class TbeTables {
 public:
  // Throws InvalidArgument for mismatched sizes or non-positive entries.
  TbeTables(std::vector<int64_t> rows, std::vector<int64_t> dims);

  [[nodiscard]] int num_tables() const { return static_cast<int>(rows_.size()); }
  [[nodiscard]] int64_t rows(int t) const { return rows_[t]; }
  [[nodiscard]] int64_t dim(int t) const { return dims_[t]; }
  [[nodiscard]] int64_t total_rows() const { return row_offsets_.back(); }
  [[nodiscard]] int64_t total_dim() const { return output_offsets_.back(); }
  [[nodiscard]] int64_t total_elements() const { return weight_offsets_.back(); }
  // Where table t starts: its first row among all rows, its first element in
  // the weights, its first column in the output.
  [[nodiscard]] int64_t row_offset(int t) const { return row_offsets_[t]; }
  [[nodiscard]] int64_t weight_offset(int t) const { return weight_offsets_[t]; }
  [[nodiscard]] int64_t output_offset(int t) const { return output_offsets_[t]; }

 private:
  friend struct internal::TbeTablesAccess;

  std::vector<int64_t> rows_;
  std::vector<int64_t> dims_;
  std::vector<int64_t> row_offsets_;     // T + 1
  std::vector<int64_t> weight_offsets_;  // T + 1
  std::vector<int64_t> output_offsets_;  // T + 1
  // The arrays packed for the kernels, and their GPU copies: made once,
  // shared with copies of this object and with every op pushed with it.
  std::shared_ptr<internal::TbeDeviceTables> device_tables_;
};

enum class Pooling { kSum, kMean };

struct TbeOptions {
  Pooling pooling = Pooling::kSum;
  bool validate = true;        // see "Validation"
  bool deterministic = false;  // see "Backward": always honoured
  // Where a GPU op gets its memory (see "GPU memory"); the CPU ignores
  // them. Null: storage::GetStorage of kDevice and of kPinned on the op's
  // GPU. A manager given must be of that kind (and GPU), and outlive
  // every op pushed with it and every TbeTables whose copy it holds.
  storage::StorageManager* device_memory = nullptr;
  storage::StorageManager* pinned_memory = nullptr;
  // The engine's pool that runs the op (engine/context.h). On a GPU each
  // pool has streams of its own, and under the Async engines an op waits
  // for its inputs on its stream, holding up every op behind it there: a
  // lookup whose batch is still being prefetched belongs on streams of its
  // own (kGPUPrioritized), not on the compute streams of the step beside it.
  engine::FnProperty property = engine::FnProperty::kNormal;
};

// One batch of lookups. per_sample_weights may be null.
struct TbeBatch {
  const Tensor* indices = nullptr;
  const Tensor* offsets = nullptr;
  const Tensor* per_sample_weights = nullptr;
  int64_t batch_size = 0;  // B
};

// Checks `batch` on the host as the ops validate it (see "Validation"):
// for a batch made on the host, before its upload. One pass over the
// offsets and the indices; allocates nothing. Throws InvalidArgument
// "[ValidateTbeBatch] table t, bag b: ..." for the first bad entry, and
// for what a push would refuse (dtypes, shapes) or tensors not on the
// CPU. Reads the tensors' data at once, not through the engine: REQUIRES
// no pending pushed write of them (the caller filled them after
// WaitToWrite, or waited with WaitToRead), or a call from an op that reads
// them. Never blocks.
void ValidateTbeBatch(const TbeTables& tables, const TbeBatch& batch);

// Rows held outside the weights (the cache layer's slots; cache/cached_tbe.h):
// the index at position k of the batch reads, and a backward updates, row
// locations[k] of `slots` when locations[k] >= 0, and its home row in the
// weights when it is -1. Optimizer state stays indexed by the home row.
// REQUIRES: every occurrence of one row in a batch has the same location,
// and a location names a slot that holds that row (the cache guarantees
// both). slots: [num_slots, slot_dim] in the weights' dtype, slot_dim at
// least every table's dim; locations: i32 with at least indices.numel()
// entries (more are ignored). A forward reads both; a backward reads
// locations and writes slots (and the weights). `order_after`, if set, is
// read only to order the op: after that tensor's writers and before its
// next writer (the cache's state, for an inference forward). `dirty`, if
// set (i32, a flag per slot), is written by a backward: 1 for each slot
// whose row it updates, so that the cache knows which rows differ from
// their home rows (cache::CacheOptions::write_back); a forward ignores it.
struct TbeCachedRows {
  const Tensor* locations = nullptr;
  const Tensor* slots = nullptr;
  const Tensor* order_after = nullptr;
  const Tensor* dirty = nullptr;
};

// Reads weights and the batch; writes out ([B, total_dim] f32). With
// `cached`, rows come from its slots where its locations say so.
void EmbeddingBagForward(const TbeTables& tables, const Tensor& weights, const TbeBatch& batch,
                         Tensor& out, const TbeOptions& options = {},
                         const TbeCachedRows* cached = nullptr);

struct SgdOptions {
  float learning_rate = 0.01f;
};
struct RowwiseAdagradOptions {
  float learning_rate = 0.01f;
  float eps = 1e-8f;
};
struct AdamOptions {
  float learning_rate = 0.001f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
};

// Backward fused with SGD. Reads the batch and grad_output; writes weights.
void EmbeddingBagBackwardSgd(const TbeTables& tables, Tensor& weights, const TbeBatch& batch,
                             const Tensor& grad_output, const SgdOptions& sgd,
                             const TbeOptions& options = {}, const TbeCachedRows* cached = nullptr);

// Backward fused with row-wise Adagrad. `accumulator`: 1-D f32 of
// total_rows, one per row (start at 0). Writes weights and accumulator.
void EmbeddingBagBackwardRowwiseAdagrad(const TbeTables& tables, Tensor& weights,
                                        Tensor& accumulator, const TbeBatch& batch,
                                        const Tensor& grad_output,
                                        const RowwiseAdagradOptions& adagrad,
                                        const TbeOptions& options = {},
                                        const TbeCachedRows* cached = nullptr);

// Backward fused with Adam. `m`, `v`: 1-D f32 of total_elements (start at
// 0); `step`: this step's number, from 1. Writes weights, m and v.
void EmbeddingBagBackwardAdam(const TbeTables& tables, Tensor& weights, Tensor& m, Tensor& v,
                              const TbeBatch& batch, const Tensor& grad_output, int64_t step,
                              const AdamOptions& adam, const TbeOptions& options = {},
                              const TbeCachedRows* cached = nullptr);

}  // namespace ember::ops
