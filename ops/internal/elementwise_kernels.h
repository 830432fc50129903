#pragma once

// The elementwise kernels behind elementwise.h, on one argument struct for
// the CPU and the CUDA kernel alike. Every pointwise op's math is written
// once, in PointwiseAt, which both kernels call; the two differ only in how
// they walk the elements (and nvcc may fuse a multiply-add that g++ rounds
// twice). The CPU kernel runs to completion; the CUDA kernel launches on
// `stream` (a cudaStream_t) and returns; a build without CUDA links a stub
// that throws Unavailable.
//
// Thread safety: reentrant (each call works on its own arguments).

#include <cstdint>
#include <string_view>

#include "ops/internal/counter_random.h"

namespace ember::ops::internal {

enum class ElementwiseOp : uint8_t {
  kAddBias,      // out[i] = a[i] + b[i % cols]       (out is a: in place)
  kAddBiasRelu,  // out[i] = relu(a[i] + b[i % cols]) (in place)
  kBiasGrad,     // out[c] = sum over rows r of a[r * cols + c]; n = rows * cols
  kRelu,         // out[i] = a[i] > 0 ? a[i] : 0
  kReluGrad,     // out[i] = b[i] > 0 ? a[i] : 0      (a: dy, b: relu's y)
  kFill,         // out[i] = alpha
  kUniform,      // out[i] = UniformAt(seed, i, alpha, beta)
  kNormal,       // out[i] = NormalAt(seed, i, alpha, beta)
  kScale,        // out[i] = alpha * a[i]
  kAxpy,         // out[i] = out[i] + alpha * a[i]
  kAdd,          // out[i] = a[i] + b[i]
  kMul,          // out[i] = a[i] * b[i]
  kCopy,         // out[i] = a[i]
};

struct ElementwiseArgs {
  ElementwiseOp op = ElementwiseOp::kFill;
  int64_t n = 0;     // elements walked: out's, or a's for kBiasGrad
  int64_t cols = 0;  // kAddBias, kBiasGrad: the row length
  const float* a = nullptr;
  const float* b = nullptr;
  float* out = nullptr;
  float alpha = 0.0f;
  float beta = 0.0f;
  uint64_t seed = 0;
};

EMBER_HOST_DEVICE inline float ReluOf(float x) { return x > 0.0f ? x : 0.0f; }

// The value of out[i] for every op but kBiasGrad (a reduction). A template,
// so that each kernel's loop is compiled per op, without a switch inside,
// and per index type: the GPU walks tensors of fewer than 2^31 elements
// with 32-bit indices (AddBias's 64-bit `i % cols` took it to 39.7 us on
// [8192, 1024], where Relu, moving the same bytes, took 31.3 us; H200).
template <ElementwiseOp kOp, typename Index = int64_t>
EMBER_HOST_DEVICE inline float PointwiseAt(const ElementwiseArgs& args, Index i) {
  using Op = ElementwiseOp;
  if constexpr (kOp == Op::kAddBias) return args.a[i] + args.b[i % static_cast<Index>(args.cols)];
  if constexpr (kOp == Op::kAddBiasRelu) {
    return ReluOf(args.a[i] + args.b[i % static_cast<Index>(args.cols)]);
  }
  if constexpr (kOp == Op::kRelu) return ReluOf(args.a[i]);
  if constexpr (kOp == Op::kReluGrad) return args.b[i] > 0.0f ? args.a[i] : 0.0f;
  if constexpr (kOp == Op::kFill) return args.alpha;
  if constexpr (kOp == Op::kUniform) {
    return UniformAt(args.seed, static_cast<uint64_t>(i), args.alpha, args.beta);
  }
  if constexpr (kOp == Op::kNormal) {
    return NormalAt(args.seed, static_cast<uint64_t>(i), args.alpha, args.beta);
  }
  if constexpr (kOp == Op::kScale) return args.alpha * args.a[i];
  if constexpr (kOp == Op::kAxpy) return args.out[i] + args.alpha * args.a[i];
  if constexpr (kOp == Op::kAdd) return args.a[i] + args.b[i];
  if constexpr (kOp == Op::kMul) return args.a[i] * args.b[i];
  if constexpr (kOp == Op::kCopy) return args.a[i];
  return 0.0f;
}

template <ElementwiseOp kOp>
struct PointwiseTag {
  static constexpr ElementwiseOp kValue = kOp;
};

// Calls visit(PointwiseTag<op>{}) for the pointwise `op` (not kBiasGrad).
template <typename Visit>
void VisitPointwise(ElementwiseOp op, Visit&& visit) {
  using Op = ElementwiseOp;
  switch (op) {
    case Op::kAddBias:
      return visit(PointwiseTag<Op::kAddBias>{});
    case Op::kAddBiasRelu:
      return visit(PointwiseTag<Op::kAddBiasRelu>{});
    case Op::kRelu:
      return visit(PointwiseTag<Op::kRelu>{});
    case Op::kReluGrad:
      return visit(PointwiseTag<Op::kReluGrad>{});
    case Op::kFill:
      return visit(PointwiseTag<Op::kFill>{});
    case Op::kUniform:
      return visit(PointwiseTag<Op::kUniform>{});
    case Op::kNormal:
      return visit(PointwiseTag<Op::kNormal>{});
    case Op::kScale:
      return visit(PointwiseTag<Op::kScale>{});
    case Op::kAxpy:
      return visit(PointwiseTag<Op::kAxpy>{});
    case Op::kAdd:
      return visit(PointwiseTag<Op::kAdd>{});
    case Op::kMul:
      return visit(PointwiseTag<Op::kMul>{});
    case Op::kCopy:
      return visit(PointwiseTag<Op::kCopy>{});
    case Op::kBiasGrad:
      return;
  }
}

void ElementwiseCpu(const ElementwiseArgs& args);
// `op` names the pushed op in CUDA errors.
void ElementwiseCuda(const ElementwiseArgs& args, void* stream, std::string_view op);

}  // namespace ember::ops::internal
