#pragma once

// ModelConfig: the shape of a DLRM-style model and its optimizer, what a
// checkpoint must match to be loaded.
//
//   dense [B, num_dense] -> bottom MLP (ReLU after every layer) -> z [B, D]
//   sparse (T tables of D columns) -> cached TBE -> pooled [B, T*D]
//   [z, pooled] as [B, T+1, D] -> pairwise dots -> [B, (T+1)T/2]
//   [z, dots] -> top MLP (ReLU after every layer but the last) -> logit [B, 1]
//   sigmoid + binary cross-entropy against the click labels
//
// Thread safety: plain values.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ops/embedding_bag.h"
#include "ops/matmul.h"
#include "storage/dtype.h"

namespace ember::train {

// One optimizer family for both halves of the model: the dense parameters
// get ops/optimizer.h's, the tables the TBE's fused twin (row-wise Adagrad
// for Adagrad: one accumulator per row, as FBGEMM's).
enum class Optimizer { kSgd, kAdagrad, kAdam };

std::string_view ToString(Optimizer optimizer);
// "sgd", "adagrad" or "adam"; throws InvalidArgument listing them.
Optimizer ParseOptimizer(std::string_view name);

struct OptimizerConfig {
  Optimizer kind = Optimizer::kSgd;
  float dense_lr = 0.1f;
  float embedding_lr = 0.1f;
  float eps = 1e-8f;     // Adagrad, Adam
  float beta1 = 0.9f;    // Adam
  float beta2 = 0.999f;  // Adam
};

struct ModelConfig {
  int64_t num_dense = 13;
  // Hidden widths of the bottom MLP; its last layer, appended, has
  // embedding_dim outputs.
  std::vector<int64_t> bottom_mlp = {64, 32};
  // Rows of each embedding table (T = its size); every table has
  // embedding_dim columns, as the dot interaction needs.
  std::vector<int64_t> table_rows = std::vector<int64_t>(8, 10000);
  int64_t embedding_dim = 16;
  // Hidden widths of the top MLP; its last layer, appended, has 1 output.
  std::vector<int64_t> top_mlp = {64, 32};
  ops::Pooling pooling = ops::Pooling::kSum;
  storage::DType embedding_dtype = storage::DType::kF32;  // f32, f16 or bf16
  OptimizerConfig optimizer;
  // What the MLPs' products may use on a GPU: TF32 is several times faster
  // and not bit-comparable with the CPU (ops/matmul.h). Not shape: a
  // checkpoint loads whichever was used.
  ops::MatmulPrecision matmul_precision = ops::MatmulPrecision::kFloat32;
  uint64_t seed = 1;  // of the initial weights

  [[nodiscard]] int num_tables() const { return static_cast<int>(table_rows.size()); }
  // Columns of the interaction's output: (T + 1) T / 2.
  [[nodiscard]] int64_t interaction_pairs() const;
  // Layer widths, inputs first: {num_dense, bottom..., D} and
  // {D + pairs, top..., 1}.
  [[nodiscard]] std::vector<int64_t> bottom_sizes() const;
  [[nodiscard]] std::vector<int64_t> top_sizes() const;
  // The MLPs' parameters: a weight and a bias per layer.
  [[nodiscard]] int64_t dense_parameters() const;
  [[nodiscard]] ops::TbeTables tables() const;

  // Throws InvalidArgument "[ModelConfig] ..." naming the first bad field:
  // a non-positive width or count, no table, an absurd size (a table past
  // 2^40 rows, a dim past 1024, a layer past 2^20 wide), a dtype that is
  // not f32/f16/bf16, a learning rate that is not finite and positive.
  void Validate() const;

  // How the shape of `other` differs from this one's, one line per field
  // ("table 3 has 1000 rows, not 2000"); empty when a checkpoint of one
  // loads into the other. Learning rates and the seed are not shape.
  [[nodiscard]] std::vector<std::string> ShapeDifferences(const ModelConfig& other) const;
  // One line: "13 dense -> [64, 32, 16], 8 tables x 16 (80000 rows) -> ...".
  [[nodiscard]] std::string Describe() const;
};

}  // namespace ember::train
