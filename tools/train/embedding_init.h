#pragma once

// The initial embedding rows of the DLRM-style model: uniform in
// +-sqrt(1 / rows) per table (DLRM's), element e of the linearized tables
// drawn as ops::RandomUniform's value number e of the tables' stream of
// the model's seed. A value depends only on its place, so a rank that owns
// a shard of a table fills it with the rows one process would have.
//
// Thread safety: pure functions.

#include <cmath>
#include <cstdint>

#include "ops/elementwise.h"

namespace ember::train {

// The tables' stream of the model's seed (the MLPs' are 1 and 2: dlrm_dense.cc).
inline uint64_t EmbeddingSeed(uint64_t model_seed) {
  constexpr uint64_t kTablesStream = 3;
  return ops::RandomBits(model_seed, kTablesStream);
}

// The initial value of linearized element `element` (its table's first
// element plus its place in the table), in a table of `table_rows` rows.
inline float InitialEmbedding(uint64_t embedding_seed, int64_t table_rows, int64_t element) {
  const float hi = static_cast<float>(std::sqrt(1.0 / static_cast<double>(table_rows)));
  const float lo = -hi;
  const float u =
      static_cast<float>(ops::RandomBits(embedding_seed, static_cast<uint64_t>(element)) >> 40) *
      0x1p-24f;
  return lo + (hi - lo) * u;
}

}  // namespace ember::train
