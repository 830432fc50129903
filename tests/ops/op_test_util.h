#pragma once

// Shared pieces of the op tests: engines by name, tensors from and to host
// vectors (through the engine, so GPU tensors work alike), and the
// comparison against double-precision references.

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "storage/tensor.h"

namespace ember::ops::testing {

using storage::DType;
using storage::Tensor;

// The engine types every op test runs on (plain and Async alike).
std::vector<std::string> EngineNames();
std::unique_ptr<engine::Engine> MakeEngine(const std::string& name);

// True when a CUDA device is present.
bool HaveGpu();

// A tensor on `ctx` holding `values` (converted to `dtype`: f32, i32, i64,
// f16 or bf16), copied in through the engine.
template <typename T>
Tensor FromHost(engine::Engine& engine, const std::vector<T>& values, std::vector<int64_t> shape,
                engine::Context ctx, DType dtype);
// The tensor's elements, waited for (its error rethrown) and copied out
// through the engine.
template <typename T>
std::vector<T> ToHost(const Tensor& tensor);

// Uniform floats in [lo, hi) from `rng`.
std::vector<float> RandomFloats(std::mt19937_64& rng, std::size_t n, float lo, float hi);

// Expects |actual[i] - expected[i]| <= atol + rtol * |expected[i]| for all
// i, naming the first few that are not.
void ExpectClose(const std::vector<float>& actual, const std::vector<double>& expected, double rtol,
                 double atol, const std::string& what);

}  // namespace ember::ops::testing
