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
// InvalidArgument naming the table, the bag and the value. The CPU kernels
// check as they go. On the GPU, with options.validate, a check kernel runs
// first and the op waits for its verdict (one stream sync on the worker,
// never on the caller); without it, bad entries are skipped (never read or
// written out of bounds) and nothing is reported.
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
// deletion is deferred through the engine, so destroying it is safe).

#include <cstdint>
#include <vector>

#include "storage/tensor.h"

namespace ember::ops {

using storage::Tensor;

// The shape of a TBE: table t has rows[t] rows of dims[t] elements.
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
  std::vector<int64_t> rows_;
  std::vector<int64_t> dims_;
  std::vector<int64_t> row_offsets_;     // T + 1
  std::vector<int64_t> weight_offsets_;  // T + 1
  std::vector<int64_t> output_offsets_;  // T + 1
};

enum class Pooling { kSum, kMean };

struct TbeOptions {
  Pooling pooling = Pooling::kSum;
  bool validate = true;        // see "Validation"
  bool deterministic = false;  // see "Backward": always honoured
};

// One batch of lookups. per_sample_weights may be null.
struct TbeBatch {
  const Tensor* indices = nullptr;
  const Tensor* offsets = nullptr;
  const Tensor* per_sample_weights = nullptr;
  int64_t batch_size = 0;  // B
};

// Reads weights and the batch; writes out ([B, total_dim] f32).
void EmbeddingBagForward(const TbeTables& tables, const Tensor& weights, const TbeBatch& batch,
                         Tensor& out, const TbeOptions& options = {});

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
                             const TbeOptions& options = {});

// Backward fused with row-wise Adagrad. `accumulator`: 1-D f32 of
// total_rows, one per row (start at 0). Writes weights and accumulator.
void EmbeddingBagBackwardRowwiseAdagrad(const TbeTables& tables, Tensor& weights,
                                        Tensor& accumulator, const TbeBatch& batch,
                                        const Tensor& grad_output,
                                        const RowwiseAdagradOptions& adagrad,
                                        const TbeOptions& options = {});

// Backward fused with Adam. `m`, `v`: 1-D f32 of total_elements (start at
// 0); `step`: this step's number, from 1. Writes weights, m and v.
void EmbeddingBagBackwardAdam(const TbeTables& tables, Tensor& weights, Tensor& m, Tensor& v,
                              const TbeBatch& batch, const Tensor& grad_output, int64_t step,
                              const AdamOptions& adam, const TbeOptions& options = {});

}  // namespace ember::ops
