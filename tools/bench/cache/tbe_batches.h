#pragma once

// The batches of ember-bench-cache: made on the host (i32 indices, Zipf
// over each table's rows, zipf_trace.h) and put on the cache's context as
// tensors, the way a data loader hands batches to a training step.
//
// Thread safety: the bench's main thread only.

#include <cstdint>
#include <vector>

#include "engine/context.h"
#include "engine/engine.h"
#include "ops/embedding_bag.h"
#include "storage/tensor.h"
#include "tools/bench/cache/cache_cases.h"
#include "tools/bench/cache/zipf_trace.h"

namespace ember::bench::cache_bench {

// T*B bags of L lookups, table-major as ops/embedding_bag.h lays them out.
struct HostBatch {
  int tables = 0;
  int64_t batch_size = 0;        // B
  std::vector<int32_t> indices;  // table t's B*L rows, then table t+1's
  std::vector<int32_t> offsets;  // T*B + 1: bag i starts at i * L
};

// Batch number `number` of `shape` from `seed`: table t's rows drawn from
// `zipf` (over shape.rows rows) with salt t.
[[nodiscard]] HostBatch MakeBatch(const CacheShape& shape, const ZipfRows& zipf, uint64_t seed,
                                  uint64_t number);

// The distinct rows of `batch` as the cache names them (linear ids: table t's
// row r is t * rows + r), in increasing order.
[[nodiscard]] std::vector<int64_t> LinearRows(const HostBatch& batch, int64_t rows);

// A batch on a context, and the TbeBatch that views it.
struct BatchTensors {
  storage::Tensor indices;
  storage::Tensor offsets;
  int64_t batch_size = 0;

  [[nodiscard]] ops::TbeBatch view() const { return {&indices, &offsets, nullptr, batch_size}; }
};

// `batch` on `ctx`: written on the host, copied to a GPU by an engine op
// (returns once the copy is pushed).
[[nodiscard]] BatchTensors Upload(engine::Engine& engine, const HostBatch& batch,
                                  engine::Context ctx);

}  // namespace ember::bench::cache_bench
