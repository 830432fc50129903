#pragma once

// The arguments of every TBE kernel, CPU and CUDA alike: declared once, so
// that both kernels' parity shows in one listing. Plain data (pointers into
// the op's tensors and small per-table arrays); on the GPU the per-table
// arrays point to device memory.
//
// Thread safety: plain values.

#include <cstdint>

namespace ember::ops::internal {

enum class WeightType { kF32, kF16, kBF16 };
enum class OptimizerKind { kSgd, kRowwiseAdagrad, kAdam };

struct TbeArgs {
  int num_tables = 0;      // T
  int64_t batch_size = 0;  // B
  // Per table (T entries), and the T + 1 prefix sums of TbeTables.
  const int64_t* rows = nullptr;
  const int64_t* dims = nullptr;
  const int64_t* row_offsets = nullptr;
  const int64_t* weight_offsets = nullptr;
  const int64_t* output_offsets = nullptr;
  int64_t total_dim = 0;

  // The batch. Exactly one of indices32/indices64 (and the same for
  // offsets) is set, after the indices' dtype.
  const int32_t* indices32 = nullptr;
  const int64_t* indices64 = nullptr;
  const int32_t* offsets32 = nullptr;
  const int64_t* offsets64 = nullptr;
  int64_t num_indices = 0;
  const float* per_sample_weights = nullptr;  // null: all 1
  bool mean = false;                          // Pooling::kMean

  // Weights: `weights` points at the first element, of `weight_type`.
  void* weights = nullptr;
  WeightType weight_type = WeightType::kF32;

  // Rows held in slots (TbeCachedRows): per index a slot of `slots`
  // (slot_stride elements apart) or -1 for the home row; null: every row
  // at home.
  const int32_t* locations = nullptr;
  void* slots = nullptr;
  int64_t slot_stride = 0;
  int32_t* slot_dirty = nullptr;  // backward: set to 1 per slot it updates (null: none)

  float* out = nullptr;                // forward: [B, total_dim]
  const float* grad_output = nullptr;  // backward: [B, total_dim]

  // Backward: the optimizer and its state.
  OptimizerKind optimizer = OptimizerKind::kSgd;
  float learning_rate = 0.0f;
  float eps = 0.0f;
  float beta1 = 0.0f;
  float beta2 = 0.0f;
  float weight_decay = 0.0f;
  int64_t step = 0;
  float* accumulator = nullptr;  // row-wise Adagrad: total_rows
  float* adam_m = nullptr;       // Adam: total_elements
  float* adam_v = nullptr;
  bool deterministic = false;
};

}  // namespace ember::ops::internal
