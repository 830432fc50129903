#pragma once

// Argument checks shared by the dense ops (matmul, elementwise, interaction,
// loss, optimizer), on top of op_util.h's: every dense tensor is f32, and
// an op's output must not be one of the inputs it reads at other indices.
// Messages start with the op and name the argument, as op_util.h's do.
//
// Thread safety: pure functions.

#include <cstddef>
#include <string_view>

#include <fmt/format.h>

#include "engine/error.h"
#include "ops/internal/op_util.h"

namespace ember::ops::internal {

// Throws InvalidArgument unless `tensor` is a non-empty f32 tensor of
// `rank` dimensions.
inline void CheckF32(std::string_view op, std::string_view arg, const Tensor& tensor) {
  CheckDType(op, arg, tensor, DType::kF32);
}
inline void CheckF32Rank(std::string_view op, std::string_view arg, const Tensor& tensor,
                         std::size_t rank) {
  CheckF32(op, arg, tensor);
  if (tensor.shape().size() == rank) return;
  throw InvalidArgument(fmt::format("[{}] `{}` has shape {}; expected {} dimensions", op, arg,
                                    ShapeString(tensor.shape()), rank));
}

// Throws InvalidArgument when `out` and `in` are one tensor (one var): a
// kernel that reads `in` at other indices than it writes `out` would read
// its own results. REQUIRES: both are non-empty (checked before: two empty
// tensors share the null var).
inline void CheckNotSame(std::string_view op, std::string_view out_arg, const Tensor& out,
                         std::string_view in_arg, const Tensor& in) {
  if (out.var() != in.var()) return;
  throw InvalidArgument(fmt::format("[{}] `{}` and `{}` are one tensor; the op cannot run in place",
                                    op, out_arg, in_arg));
}

}  // namespace ember::ops::internal
