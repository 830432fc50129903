// Checks and dispatch of the elementwise ops (see elementwise.h).

#include "ops/elementwise.h"

#include <cmath>
#include <initializer_list>
#include <string_view>

#include <fmt/format.h>

#include "engine/error.h"
#include "ops/internal/counter_random.h"
#include "ops/internal/dense_checks.h"
#include "ops/internal/elementwise_kernels.h"

namespace ember::ops {
namespace {

using internal::CheckF32;
using internal::CheckF32Rank;
using internal::CheckNotSame;
using internal::CheckShape;
using internal::ElementwiseArgs;
using internal::ElementwiseOp;

// Pushes the kernel for `args` on the tensors' context (one for all: else
// InvalidArgument). `op` is a literal: the kernel keeps it for CUDA errors.
void Push(std::string_view op, std::initializer_list<const Tensor*> reads, Tensor& out,
          const ElementwiseArgs& args) {
  for (const Tensor* input : reads) internal::CheckSamePlace(op, {input, &out});
  const bool gpu = out.ctx().is_gpu();
  internal::PushKernel(op, out.ctx(), reads, {&out}, [args, gpu, op](void* stream) {
    if (gpu) {
      internal::ElementwiseCuda(args, stream, op);
    } else {
      internal::ElementwiseCpu(args);
    }
  });
}

void CheckFinite(std::string_view op, std::string_view arg, float value) {
  if (std::isfinite(value)) return;
  throw InvalidArgument(fmt::format("[{}] `{}` is {}; expected a finite value", op, arg, value));
}

// out[i] = f(a[i], b[i]) for Add and Mul.
void Binary(std::string_view op, ElementwiseOp kind, const Tensor& a, const Tensor& b,
            Tensor& out) {
  CheckF32(op, "a", a);
  CheckF32(op, "b", b);
  CheckF32(op, "out", out);
  CheckShape(op, "b", b, a.shape());
  CheckShape(op, "out", out, a.shape());
  Push(op, {&a, &b}, out,
       {.op = kind,
        .n = out.numel(),
        .a = a.data<float>(),
        .b = b.data<float>(),
        .out = out.data<float>()});
}

// y = f(y + bias) for AddBias and AddBiasRelu.
void BiasOp(std::string_view op, ElementwiseOp kind, Tensor& y, const Tensor& bias) {
  CheckF32Rank(op, "y", y, 2);
  CheckF32(op, "bias", bias);
  CheckShape(op, "bias", bias, {y.shape()[1]});
  Push(op, {&bias}, y,
       {.op = kind,
        .n = y.numel(),
        .cols = y.shape()[1],
        .a = y.data<float>(),
        .b = bias.data<float>(),
        .out = y.data<float>()});
}

}  // namespace

uint64_t RandomBits(uint64_t seed, uint64_t counter) { return internal::RandomBits(seed, counter); }

void AddBias(Tensor& y, const Tensor& bias) { BiasOp("AddBias", ElementwiseOp::kAddBias, y, bias); }

void AddBiasRelu(Tensor& y, const Tensor& bias) {
  BiasOp("AddBiasRelu", ElementwiseOp::kAddBiasRelu, y, bias);
}

void BiasGrad(const Tensor& dy, Tensor& db) {
  static constexpr std::string_view kOp = "BiasGrad";
  CheckF32Rank(kOp, "dy", dy, 2);
  CheckF32(kOp, "db", db);
  CheckShape(kOp, "db", db, {dy.shape()[1]});
  CheckNotSame(kOp, "db", db, "dy", dy);
  Push(kOp, {&dy}, db,
       {.op = ElementwiseOp::kBiasGrad,
        .n = dy.numel(),
        .cols = dy.shape()[1],
        .a = dy.data<float>(),
        .out = db.data<float>()});
}

void Relu(const Tensor& x, Tensor& y) {
  static constexpr std::string_view kOp = "Relu";
  CheckF32(kOp, "x", x);
  CheckF32(kOp, "y", y);
  CheckShape(kOp, "y", y, x.shape());
  Push(kOp, {&x}, y,
       {.op = ElementwiseOp::kRelu, .n = y.numel(), .a = x.data<float>(), .out = y.data<float>()});
}

void ReluGrad(const Tensor& dy, const Tensor& y, Tensor& dx) {
  static constexpr std::string_view kOp = "ReluGrad";
  CheckF32(kOp, "dy", dy);
  CheckF32(kOp, "y", y);
  CheckF32(kOp, "dx", dx);
  CheckShape(kOp, "y", y, dy.shape());
  CheckShape(kOp, "dx", dx, dy.shape());
  Push(kOp, {&dy, &y}, dx,
       {.op = ElementwiseOp::kReluGrad,
        .n = dx.numel(),
        .a = dy.data<float>(),
        .b = y.data<float>(),
        .out = dx.data<float>()});
}

void Fill(Tensor& x, float value) {
  CheckF32("Fill", "x", x);
  Push("Fill", {}, x,
       {.op = ElementwiseOp::kFill, .n = x.numel(), .out = x.data<float>(), .alpha = value});
}

void RandomUniform(Tensor& x, uint64_t seed, float lo, float hi) {
  static constexpr std::string_view kOp = "RandomUniform";
  CheckF32(kOp, "x", x);
  CheckFinite(kOp, "lo", lo);
  CheckFinite(kOp, "hi", hi);
  if (!(lo <= hi)) throw InvalidArgument(fmt::format("[{}] `lo` {} is above `hi` {}", kOp, lo, hi));
  Push(kOp, {}, x,
       {.op = ElementwiseOp::kUniform,
        .n = x.numel(),
        .out = x.data<float>(),
        .alpha = lo,
        .beta = hi,
        .seed = seed});
}

void RandomNormal(Tensor& x, uint64_t seed, float mean, float stddev) {
  static constexpr std::string_view kOp = "RandomNormal";
  CheckF32(kOp, "x", x);
  CheckFinite(kOp, "mean", mean);
  CheckFinite(kOp, "stddev", stddev);
  if (stddev < 0) throw InvalidArgument(fmt::format("[{}] `stddev` is {} < 0", kOp, stddev));
  Push(kOp, {}, x,
       {.op = ElementwiseOp::kNormal,
        .n = x.numel(),
        .out = x.data<float>(),
        .alpha = mean,
        .beta = stddev,
        .seed = seed});
}

void Scale(Tensor& x, float alpha) {
  CheckF32("Scale", "x", x);
  Push("Scale", {}, x,
       {.op = ElementwiseOp::kScale,
        .n = x.numel(),
        .a = x.data<float>(),
        .out = x.data<float>(),
        .alpha = alpha});
}

void Axpy(float alpha, const Tensor& x, Tensor& y) {
  static constexpr std::string_view kOp = "Axpy";
  CheckF32(kOp, "x", x);
  CheckF32(kOp, "y", y);
  CheckShape(kOp, "x", x, y.shape());
  CheckNotSame(kOp, "y", y, "x", x);
  Push(kOp, {&x}, y,
       {.op = ElementwiseOp::kAxpy,
        .n = y.numel(),
        .a = x.data<float>(),
        .out = y.data<float>(),
        .alpha = alpha});
}

void Add(const Tensor& a, const Tensor& b, Tensor& out) {
  Binary("Add", ElementwiseOp::kAdd, a, b, out);
}

void Mul(const Tensor& a, const Tensor& b, Tensor& out) {
  Binary("Mul", ElementwiseOp::kMul, a, b, out);
}

void Copy(const Tensor& src, Tensor& dst) {
  static constexpr std::string_view kOp = "Copy";
  CheckF32(kOp, "src", src);
  CheckF32(kOp, "dst", dst);
  internal::CheckNumel(kOp, "dst", dst, src.numel());
  CheckNotSame(kOp, "dst", dst, "src", src);
  Push(kOp, {&src}, dst,
       {.op = ElementwiseOp::kCopy,
        .n = dst.numel(),
        .a = src.data<float>(),
        .out = dst.data<float>()});
}

}  // namespace ember::ops
