#pragma once

// The fixture of the dense op tests (matmul, elementwise, interaction,
// loss, optimizer): one engine per test, of the type the test's parameter
// names; fresh random inputs from a seed the failure message shows; f32
// tensors from host vectors on a chosen context; and a check that a call
// throws InvalidArgument with a given message. Header-only: the test CMake
// lists one helper library, op_test_util.
//
// Suites are instantiated with the prefix "Dense" (Dense/MatmulTest.Case/
// ThreadedEngine), so --gtest_filter='Dense*' selects every dense test and
// '*MatmulTest*' one family.

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/error.h"
#include "tests/ops/op_test_util.h"

namespace ember::ops::testing {

class DenseOpTest : public ::testing::TestWithParam<std::string> {
 protected:
  DenseOpTest() : seed_(std::random_device{}()), rng_(seed_), trace_(__FILE__, __LINE__, Seed()) {}

  void SetUp() override { engine_ = MakeEngine(GetParam()); }

  [[nodiscard]] std::string Seed() const { return "random seed " + std::to_string(seed_); }

  // An f32 tensor of `shape` holding `values`, on `ctx`.
  Tensor F32(const std::vector<float>& values, std::vector<int64_t> shape,
             engine::Context ctx = engine::Context::CPU()) {
    return FromHost(*engine_, values, std::move(shape), ctx, DType::kF32);
  }
  // An f32 tensor of `shape` with uniform values in [lo, hi), and the values.
  Tensor Random(std::vector<int64_t> shape, std::vector<float>* values, float lo = -1.0f,
                float hi = 1.0f, engine::Context ctx = engine::Context::CPU()) {
    int64_t n = 1;
    for (int64_t dim : shape) n *= dim;
    *values = RandomFloats(rng_, static_cast<std::size_t>(n), lo, hi);
    return F32(*values, std::move(shape), ctx);
  }
  // An uninitialized f32 tensor.
  Tensor Empty(std::vector<int64_t> shape, engine::Context ctx = engine::Context::CPU()) {
    return Tensor::Empty(*engine_, std::move(shape), DType::kF32, ctx);
  }

  // Expects `call` to throw InvalidArgument whose message contains `message`.
  static void ExpectInvalid(const std::function<void()>& call, const std::string& message) {
    EXPECT_THAT(call, ::testing::ThrowsMessage<InvalidArgument>(::testing::HasSubstr(message)));
  }

  // Declared first, destroyed last: after every tensor of the test.
  std::unique_ptr<engine::Engine> engine_;
  const uint64_t seed_;
  std::mt19937_64 rng_;

 private:
  ::testing::ScopedTrace trace_;
};

// Names each instance after its engine: Dense/<Suite>.<Case>/<EngineName>
// from INSTANTIATE_TEST_SUITE_P(Dense, <Suite>, ValuesIn(EngineNames()),
// EngineParamName).
inline std::string EngineParamName(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

}  // namespace ember::ops::testing
