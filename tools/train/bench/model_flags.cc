#include "tools/train/bench/model_flags.h"

#include <absl/flags/flag.h>

#include "tools/train/bench/count_list.h"

namespace ember::train {

ModelConfig ModelFromFlags() {
  ModelConfig m;
  m.num_dense = absl::GetFlag(FLAGS_dense);
  m.table_rows.assign(static_cast<std::size_t>(absl::GetFlag(FLAGS_tables)),
                      absl::GetFlag(FLAGS_rows));
  m.embedding_dim = absl::GetFlag(FLAGS_dim);
  m.bottom_mlp = ParseCountList("bottom_mlp", absl::GetFlag(FLAGS_bottom_mlp));
  m.top_mlp = ParseCountList("top_mlp", absl::GetFlag(FLAGS_top_mlp));
  m.optimizer.kind = ParseOptimizer(absl::GetFlag(FLAGS_optimizer));
  m.optimizer.dense_lr = m.optimizer.embedding_lr = static_cast<float>(absl::GetFlag(FLAGS_lr));
  if (absl::GetFlag(FLAGS_tf32)) m.matmul_precision = ops::MatmulPrecision::kTensorFloat32;
  m.Validate();
  return m;
}

}  // namespace ember::train
