#pragma once

// A random TBE batch for the forward tests (CPU and CUDA): its host values,
// its double-precision reference, and its tensors on one context.
//
// Weights are drawn in [-1, 1) and rounded to the stored dtype first, so
// that the reference is computed from exactly the values a kernel reads;
// what is left between kernel and reference is f32 accumulation.

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "ops/embedding_bag.h"
#include "storage/half.h"
#include "storage/tensor.h"
#include "tests/ops/op_test_util.h"

namespace ember::ops::testing {

struct TbeProblem {
  std::vector<int64_t> rows;
  std::vector<int64_t> dims;
  int64_t batch_size = 0;
  std::vector<int64_t> indices;           // every table's, table after table
  std::vector<int64_t> offsets;           // T * B + 1
  std::vector<float> weights;             // as stored (rounded to the dtype)
  std::vector<float> per_sample_weights;  // empty: none
  DType weight_dtype = DType::kF32;

  [[nodiscard]] TbeTables tables() const { return TbeTables(rows, dims); }
  [[nodiscard]] int num_tables() const { return static_cast<int>(rows.size()); }
};

// A batch shape of the forward tests.
struct TbeShape {
  std::vector<int64_t> rows;
  std::vector<int64_t> dims;
  int64_t batch_size;
  int max_bag;
};

// Odd dims (1, 3, 5, 130) take the CUDA kernel's scalar path, multiples of
// 4 the vector one, dims under 128 its lane groups; 130 and 260 are wider
// than one 128-column chunk.
inline const std::vector<TbeShape>& TbeShapes() {
  static const std::vector<TbeShape> shapes = {
      {{7, 50, 33}, {3, 8, 130}, 9, 6},
      {{1000}, {128}, 16, 12},
      {{5, 9, 2, 40, 11}, {1, 4, 16, 64, 5}, 4, 3},
      {{3, 20}, {260, 32}, 5, 10},
  };
  return shapes;
}

// The value `v` becomes when stored as `dtype`.
inline float RoundTo(DType dtype, float v) {
  switch (dtype) {
    case DType::kF16:
      return storage::HalfToFloat(storage::FloatToHalf(v));
    case DType::kBF16:
      return storage::Bf16ToFloat(storage::FloatToBf16(v));
    default:
      return v;
  }
}

// Bags of 0 .. max_bag entries (empty ones included), uniform indices.
inline TbeProblem RandomTbeProblem(std::mt19937_64& rng, std::vector<int64_t> rows,
                                   std::vector<int64_t> dims, int64_t batch_size, int max_bag,
                                   bool weighted, DType weight_dtype) {
  TbeProblem p;
  p.rows = std::move(rows);
  p.dims = std::move(dims);
  p.batch_size = batch_size;
  p.weight_dtype = weight_dtype;
  const TbeTables tables = p.tables();
  p.weights = RandomFloats(rng, static_cast<std::size_t>(tables.total_elements()), -1.0f, 1.0f);
  for (float& w : p.weights) w = RoundTo(weight_dtype, w);
  std::uniform_int_distribution<int> bag_size(0, max_bag);
  p.offsets.push_back(0);
  for (int t = 0; t < p.num_tables(); ++t) {
    std::uniform_int_distribution<int64_t> row(0, p.rows[t] - 1);
    for (int64_t b = 0; b < batch_size; ++b) {
      const int n = bag_size(rng);
      for (int i = 0; i < n; ++i) p.indices.push_back(row(rng));
      p.offsets.push_back(static_cast<int64_t>(p.indices.size()));
    }
  }
  if (weighted) p.per_sample_weights = RandomFloats(rng, p.indices.size(), 0.5f, 2.0f);
  return p;
}

// out[b, table t's columns] in double precision, per embedding_bag.h.
inline std::vector<double> TbeReference(const TbeProblem& p, bool mean) {
  const TbeTables tables = p.tables();
  std::vector<double> out(static_cast<std::size_t>(p.batch_size * tables.total_dim()), 0.0);
  for (int t = 0; t < p.num_tables(); ++t) {
    for (int64_t b = 0; b < p.batch_size; ++b) {
      const int64_t g = t * p.batch_size + b;
      const int64_t start = p.offsets[g];
      const int64_t end = p.offsets[g + 1];
      double* row_out = out.data() + b * tables.total_dim() + tables.output_offset(t);
      for (int64_t i = start; i < end; ++i) {
        const double w = p.per_sample_weights.empty() ? 1.0 : p.per_sample_weights[i];
        const float* row = p.weights.data() + tables.weight_offset(t) + p.indices[i] * p.dims[t];
        for (int64_t d = 0; d < p.dims[t]; ++d) row_out[d] += w * row[d];
      }
      if (mean && end > start) {
        for (int64_t d = 0; d < p.dims[t]; ++d) row_out[d] /= static_cast<double>(end - start);
      }
    }
  }
  return out;
}

// A problem's tensors on one context; `out` is uninitialized.
struct TbeTensors {
  Tensor weights;
  Tensor indices;
  Tensor offsets;
  Tensor per_sample_weights;  // empty without
  Tensor out;

  [[nodiscard]] TbeBatch batch(int64_t batch_size) const {
    return {.indices = &indices,
            .offsets = &offsets,
            .per_sample_weights = per_sample_weights ? &per_sample_weights : nullptr,
            .batch_size = batch_size};
  }
};

inline TbeTensors MakeTbeTensors(engine::Engine& engine, const TbeProblem& p, engine::Context ctx,
                                 DType index_dtype) {
  const TbeTables tables = p.tables();
  const auto n = static_cast<int64_t>(p.indices.size());
  TbeTensors t;
  t.weights = FromHost(engine, p.weights, {tables.total_elements()}, ctx, p.weight_dtype);
  t.indices = FromHost(engine, p.indices, {n}, ctx, index_dtype);
  t.offsets =
      FromHost(engine, p.offsets, {static_cast<int64_t>(p.offsets.size())}, ctx, index_dtype);
  if (!p.per_sample_weights.empty()) {
    t.per_sample_weights = FromHost(engine, p.per_sample_weights, {n}, ctx, DType::kF32);
  }
  t.out = Tensor::Empty(engine, {p.batch_size, tables.total_dim()}, DType::kF32, ctx);
  return t;
}

// Runs the forward of `p` on `ctx` and returns out, waited for (an op error
// is rethrown).
inline std::vector<float> RunTbeForward(engine::Engine& engine, const TbeProblem& p,
                                        engine::Context ctx, DType index_dtype,
                                        const TbeOptions& options) {
  TbeTensors t = MakeTbeTensors(engine, p, ctx, index_dtype);
  EmbeddingBagForward(p.tables(), t.weights, t.batch(p.batch_size), t.out, options);
  return ToHost<float>(t.out);
}

inline std::string Describe(DType index_dtype, DType weight_dtype, bool mean, bool weighted) {
  return std::string(storage::ToString(index_dtype)) + " indices, " +
         std::string(storage::ToString(weight_dtype)) + " weights, " + (mean ? "mean" : "sum") +
         (weighted ? ", per-sample weights" : "");
}

// A valid problem of 3 tables (rows 7, 50, 33; dims 3, 8, 4) and 4 bags of
// 2 entries each (bag b holds rows b and b + 1), random weights from `seed`:
// what the bad-input tests corrupt.
inline TbeProblem SmallTbeProblem(uint64_t seed) {
  std::mt19937_64 rng(seed);
  TbeProblem p = RandomTbeProblem(rng, {7, 50, 33}, {3, 8, 4}, 4, 0, false, DType::kF32);
  p.indices.clear();
  p.offsets = {0};
  for (int t = 0; t < 3; ++t) {
    for (int b = 0; b < 4; ++b) {
      p.indices.push_back(b);
      p.indices.push_back(b + 1);
      p.offsets.push_back(static_cast<int64_t>(p.indices.size()));
    }
  }
  return p;
}

// The bad-input cases of the validation tests (CPU, GPU and host): each
// corrupts SmallTbeProblem's batch of 3 tables x 4 bags of 2 entries.
struct BadBatch {
  const char* name;
  void (*corrupt)(TbeProblem& p);
};

inline const std::vector<BadBatch>& BadBatches() {
  static const std::vector<BadBatch> cases = {
      {"index too large", [](TbeProblem& p) { p.indices[23] = 33; }},
      {"negative index", [](TbeProblem& p) { p.indices[8] = -4; }},
      {"two bad bags", [](TbeProblem& p) { p.indices[17] = 100, p.indices[13] = 60; }},
      {"decreasing offsets", [](TbeProblem& p) { p.offsets[6] = 15; }},
      {"first offset", [](TbeProblem& p) { p.offsets[0] = 1; }},
      {"negative first offset", [](TbeProblem& p) { p.offsets[0] = -3; }},
      {"last offset", [](TbeProblem& p) { p.offsets[12] = 23; }},
      {"offset past the end", [](TbeProblem& p) { p.offsets[5] = 30; }},
      {"negative offset", [](TbeProblem& p) { p.offsets[3] = -1; }},
  };
  return cases;
}

// The forward's case grid: every shape x weight dtype x with and without
// per-sample weights (a fresh random problem each) x index dtype x pooling.
// `check(problem, index_dtype, pooling, what)` runs one case; `what` names it.
template <typename Check>
void ForEachTbeForwardCase(std::mt19937_64& rng, const std::vector<TbeShape>& shapes, Check check) {
  for (const TbeShape& shape : shapes) {
    for (DType weight_dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
      for (bool weighted : {false, true}) {
        const TbeProblem p = RandomTbeProblem(rng, shape.rows, shape.dims, shape.batch_size,
                                              shape.max_bag, weighted, weight_dtype);
        for (DType index_dtype : {DType::kI32, DType::kI64}) {
          for (bool mean : {false, true}) {
            check(p, index_dtype, mean ? Pooling::kMean : Pooling::kSum,
                  Describe(index_dtype, weight_dtype, mean, weighted) + ", dims " +
                      ::testing::PrintToString(shape.dims));
          }
        }
      }
    }
  }
}

}  // namespace ember::ops::testing
