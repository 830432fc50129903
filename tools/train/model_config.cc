#include "tools/train/model_config.h"

#include <cmath>
#include <numeric>

#include <absl/strings/str_join.h>
#include <fmt/format.h>

#include "engine/error.h"

namespace ember::train {
namespace {

// Limits past which a value is a typo rather than a model: they keep every
// product of sizes far from overflowing int64.
constexpr int64_t kMaxRows = int64_t{1} << 40;
constexpr int64_t kMaxWidth = int64_t{1} << 20;
constexpr int64_t kMaxDim = 1024;  // the GPU TBE backward's widest row (ops/embedding_bag.h)
constexpr int kMaxTables = 1024;

[[noreturn]] void Bad(const std::string& what) {
  throw InvalidArgument(fmt::format("[ModelConfig] {}", what));
}

void CheckWidths(std::string_view name, const std::vector<int64_t>& widths) {
  for (std::size_t i = 0; i < widths.size(); ++i) {
    if (widths[i] < 1 || widths[i] > kMaxWidth) {
      Bad(fmt::format("{}[{}] = {} is not in [1, {}]", name, i, widths[i], kMaxWidth));
    }
  }
}

void CheckRate(std::string_view name, float value) {
  if (!(value > 0.0f) || !std::isfinite(value)) {
    Bad(fmt::format("{} = {} must be a finite positive number", name, value));
  }
}

std::string Widths(const std::vector<int64_t>& widths) {
  return fmt::format("[{}]", absl::StrJoin(widths, ", "));
}

}  // namespace

std::string_view ToString(Optimizer optimizer) {
  switch (optimizer) {
    case Optimizer::kSgd:
      return "sgd";
    case Optimizer::kAdagrad:
      return "adagrad";
    case Optimizer::kAdam:
      return "adam";
  }
  return "?";
}

Optimizer ParseOptimizer(std::string_view name) {
  for (Optimizer o : {Optimizer::kSgd, Optimizer::kAdagrad, Optimizer::kAdam}) {
    if (name == ToString(o)) return o;
  }
  throw InvalidArgument(
      fmt::format("[ParseOptimizer] unknown optimizer '{}'; valid: sgd, adagrad, adam", name));
}

int64_t ModelConfig::interaction_pairs() const {
  const int64_t features = num_tables() + 1;
  return features * (features - 1) / 2;
}

std::vector<int64_t> ModelConfig::bottom_sizes() const {
  std::vector<int64_t> sizes = {num_dense};
  sizes.insert(sizes.end(), bottom_mlp.begin(), bottom_mlp.end());
  sizes.push_back(embedding_dim);
  return sizes;
}

std::vector<int64_t> ModelConfig::top_sizes() const {
  std::vector<int64_t> sizes = {embedding_dim + interaction_pairs()};
  sizes.insert(sizes.end(), top_mlp.begin(), top_mlp.end());
  sizes.push_back(1);
  return sizes;
}

int64_t ModelConfig::dense_parameters() const {
  int64_t count = 0;
  for (const std::vector<int64_t>& sizes : {bottom_sizes(), top_sizes()}) {
    for (size_t l = 0; l + 1 < sizes.size(); ++l) count += (sizes[l] + 1) * sizes[l + 1];
  }
  return count;
}

ops::TbeTables ModelConfig::tables() const {
  return ops::TbeTables(table_rows, std::vector<int64_t>(table_rows.size(), embedding_dim));
}

void ModelConfig::Validate() const {
  if (num_dense < 1 || num_dense > kMaxWidth) {
    Bad(fmt::format("num_dense = {} is not in [1, {}]", num_dense, kMaxWidth));
  }
  CheckWidths("bottom_mlp", bottom_mlp);
  CheckWidths("top_mlp", top_mlp);
  if (table_rows.empty()) Bad("no embedding table: give at least one");
  if (table_rows.size() > kMaxTables) {
    Bad(fmt::format("{} tables; at most {}", table_rows.size(), kMaxTables));
  }
  for (std::size_t t = 0; t < table_rows.size(); ++t) {
    if (table_rows[t] < 1 || table_rows[t] > kMaxRows) {
      Bad(fmt::format("table {} has {} rows; expected 1 to 2^40", t, table_rows[t]));
    }
  }
  if (embedding_dim < 1 || embedding_dim > kMaxDim) {
    Bad(fmt::format("embedding_dim = {} is not in [1, {}]", embedding_dim, kMaxDim));
  }
  if (embedding_dtype != storage::DType::kF32 && embedding_dtype != storage::DType::kF16 &&
      embedding_dtype != storage::DType::kBF16) {
    Bad(fmt::format("embedding_dtype {} is not f32, f16 or bf16",
                    storage::ToString(embedding_dtype)));
  }
  CheckRate("dense_lr", optimizer.dense_lr);
  CheckRate("embedding_lr", optimizer.embedding_lr);
  CheckRate("eps", optimizer.eps);
  for (float beta : {optimizer.beta1, optimizer.beta2}) {
    if (!(beta >= 0.0f && beta < 1.0f)) Bad(fmt::format("Adam beta {} is not in [0, 1)", beta));
  }
}

std::vector<std::string> ModelConfig::ShapeDifferences(const ModelConfig& checkpoint) const {
  std::vector<std::string> diffs;
  auto differ = [&](std::string_view field, const auto& ours, const auto& theirs) {
    diffs.push_back(fmt::format("{}: the checkpoint has {}, this model {}", field, theirs, ours));
  };
  if (num_dense != checkpoint.num_dense) differ("dense features", num_dense, checkpoint.num_dense);
  if (bottom_mlp != checkpoint.bottom_mlp) {
    differ("bottom MLP", Widths(bottom_mlp), Widths(checkpoint.bottom_mlp));
  }
  if (top_mlp != checkpoint.top_mlp) differ("top MLP", Widths(top_mlp), Widths(checkpoint.top_mlp));
  if (embedding_dim != checkpoint.embedding_dim) {
    differ("embedding dim", embedding_dim, checkpoint.embedding_dim);
  }
  if (table_rows.size() != checkpoint.table_rows.size()) {
    differ("tables", table_rows.size(), checkpoint.table_rows.size());
  } else {
    for (std::size_t t = 0; t < table_rows.size(); ++t) {
      if (table_rows[t] != checkpoint.table_rows[t]) {
        differ(fmt::format("table {} rows", t), table_rows[t], checkpoint.table_rows[t]);
      }
    }
  }
  if (pooling != checkpoint.pooling) {
    differ("pooling", pooling == ops::Pooling::kSum ? "sum" : "mean",
           checkpoint.pooling == ops::Pooling::kSum ? "sum" : "mean");
  }
  if (embedding_dtype != checkpoint.embedding_dtype) {
    differ("embedding dtype", storage::ToString(embedding_dtype),
           storage::ToString(checkpoint.embedding_dtype));
  }
  if (optimizer.kind != checkpoint.optimizer.kind) {
    differ("optimizer", ToString(optimizer.kind), ToString(checkpoint.optimizer.kind));
  }
  return diffs;
}

std::string ModelConfig::Describe() const {
  const int64_t rows = std::accumulate(table_rows.begin(), table_rows.end(), int64_t{0});
  const bool tf32 = matmul_precision == ops::MatmulPrecision::kTensorFloat32;
  return fmt::format("{} dense -> {}, {} tables x {} ({} rows, {}) -> {} dots -> {}, {}{}",
                     num_dense, Widths(bottom_sizes()), num_tables(), embedding_dim, rows,
                     storage::ToString(embedding_dtype), interaction_pairs(), Widths(top_sizes()),
                     ToString(optimizer.kind), tf32 ? ", TF32 matmuls" : "");
}

}  // namespace ember::train
