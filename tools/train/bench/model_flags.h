#pragma once

// The model flags the training benches share (ember-bench-train,
// ember-bench-dist): declared here, defined by each binary with its own
// defaults (ABSL_FLAG in its main file), read into a ModelConfig here.
//
// Thread safety: read the flags after absl::ParseCommandLine, from one
// thread.

#include <cstdint>
#include <string>

#include <absl/flags/declare.h>

#include "tools/train/model_config.h"

ABSL_DECLARE_FLAG(int64_t, tables);
ABSL_DECLARE_FLAG(int64_t, rows);
ABSL_DECLARE_FLAG(int64_t, dim);
ABSL_DECLARE_FLAG(int64_t, dense);
ABSL_DECLARE_FLAG(std::string, bottom_mlp);
ABSL_DECLARE_FLAG(std::string, top_mlp);
ABSL_DECLARE_FLAG(std::string, optimizer);
ABSL_DECLARE_FLAG(double, lr);
ABSL_DECLARE_FLAG(bool, tf32);

namespace ember::train {

// --tables tables of --rows rows and --dim columns, --dense dense features,
// the MLPs' hidden widths, the optimizer with --lr for dense and embedding
// parameters alike, TF32 matmuls with --tf32. Throws InvalidArgument for a value that does not
// parse or a model that ModelConfig::Validate refuses.
ModelConfig ModelFromFlags();

}  // namespace ember::train
