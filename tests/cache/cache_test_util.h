#pragma once

// Helpers of the cache tests: batches built from bags of row numbers, host
// tensors filled from vectors, and reading tensors back (any context).

#include <cstdint>
#include <vector>

#include "engine/engine.h"
#include "ops/embedding_bag.h"
#include "storage/tensor.h"

namespace ember::cache::testing {

using storage::Tensor;

// A batch's tensors: indices and offsets (i64) on `ctx`, table-major bags
// (bags[t * B + b] lists the rows of bag b of table t).
struct Batch {
  Tensor indices;
  Tensor offsets;
  int64_t batch_size = 0;

  [[nodiscard]] ops::TbeBatch view() const {
    return ops::TbeBatch{&indices, &offsets, nullptr, batch_size};
  }
};

// The bags' indices end to end, and their offsets (one more than bags).
struct FlatBags {
  std::vector<int64_t> indices;
  std::vector<int64_t> offsets;
};
FlatBags Flatten(const std::vector<std::vector<int64_t>>& bags);

// A batch of num_tables * batch_size bags on `ctx`, the first of them
// `bags` and the rest empty.
Batch MakeBatch(engine::Engine& engine, engine::Context ctx, int num_tables, int64_t batch_size,
                const std::vector<std::vector<int64_t>>& bags);

// A tensor on `ctx` holding `values` (f32 or i64 or i32 after T).
template <typename T>
Tensor FromHost(engine::Engine& engine, engine::Context ctx, const std::vector<T>& values,
                std::vector<int64_t> shape = {});

// The tensor's elements, copied to the host after its writes finished.
template <typename T>
std::vector<T> ToHost(const Tensor& tensor);

}  // namespace ember::cache::testing
