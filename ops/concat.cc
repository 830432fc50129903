// Checks and dispatch of the column concatenation (see concat.h).

#include "ops/concat.h"

#include <array>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "engine/error.h"
#include "ops/internal/concat_kernels.h"
#include "ops/internal/dense_checks.h"

namespace ember::ops {
namespace {

using internal::ConcatArgs;
using internal::ConcatDirection;

// The parts padded with nulls to kMaxConcatParts: the push helpers take
// fixed lists and skip null entries, so a call needs no allocation.
static_assert(internal::kMaxParts == kMaxConcatParts);

template <typename T>
using PartArray = std::array<T*, kMaxConcatParts>;

// Columns of a tensor read as rows of its first dimension (concat.h).
int64_t Columns(const Tensor& tensor) {
  int64_t columns = 1;
  for (std::size_t i = 1; i < tensor.shape().size(); ++i) columns *= tensor.shape()[i];
  return columns;
}

void CheckOperand(std::string_view op, std::string_view arg, const Tensor& tensor) {
  internal::CheckF32(op, arg, tensor);
  if (tensor.shape().empty()) {
    throw InvalidArgument(
        fmt::format("[{}] `{}` has no dimensions; expected rows as its first", op, arg));
  }
}

// Checks the whole and its parts and lays the parts out side by side.
template <typename T>
ConcatArgs Layout(std::string_view op, std::string_view whole_arg, const Tensor& whole,
                  std::initializer_list<T*> parts, PartArray<T>* padded) {
  const auto count = static_cast<int>(parts.size());
  if (count < 1 || count > kMaxConcatParts) {
    throw InvalidArgument(
        fmt::format("[{}] {} parts; expected 1 to {}", op, parts.size(), kMaxConcatParts));
  }
  CheckOperand(op, whole_arg, whole);
  ConcatArgs args;
  args.rows = whole.shape()[0];
  args.width = Columns(whole);
  args.num_parts = count;
  args.whole = whole.data<float>();
  int64_t offset = 0;
  int k = 0;
  for (T* part : parts) {
    const std::string arg = fmt::format("parts[{}]", k);
    if (part == nullptr) throw InvalidArgument(fmt::format("[{}] `{}` is null", op, arg));
    CheckOperand(op, arg, *part);
    if (part->shape()[0] != args.rows) {
      throw InvalidArgument(fmt::format("[{}] `{}` has {} rows (shape {}); `{}` has {}", op, arg,
                                        part->shape()[0], internal::ShapeString(part->shape()),
                                        whole_arg, args.rows));
    }
    internal::CheckNotSame(op, whole_arg, whole, arg, *part);
    for (int earlier = 0; earlier < k; ++earlier) {
      internal::CheckNotSame(op, arg, *part, fmt::format("parts[{}]", earlier),
                             *(*padded)[earlier]);
    }
    args.part_width[k] = Columns(*part);
    args.part_offset[k] = offset;
    args.part[k] = part->template data<float>();
    offset += args.part_width[k];
    (*padded)[k] = part;
    ++k;
  }
  if (offset != args.width) {
    throw InvalidArgument(
        fmt::format("[{}] the parts have {} columns in all; `{}` has {} (shape {})", op, offset,
                    whole_arg, args.width, internal::ShapeString(whole.shape())));
  }
  return args;
}

void Push(std::string_view op, const ConcatArgs& args, std::initializer_list<const Tensor*> reads,
          std::initializer_list<const Tensor*> writes, engine::Context ctx) {
  internal::PushKernel(op, ctx, reads, writes, [args, gpu = ctx.is_gpu(), op](void* stream) {
    if (gpu) {
      internal::ConcatCuda(args, stream, op);
    } else {
      internal::ConcatCpu(args);
    }
  });
}

}  // namespace

void ConcatColumns(std::initializer_list<const Tensor*> parts, Tensor& out) {
  static constexpr std::string_view kOp = "ConcatColumns";
  PartArray<const Tensor> p{};
  ConcatArgs args = Layout(kOp, "out", out, parts, &p);
  args.direction = ConcatDirection::kToWhole;
  const engine::Context ctx = internal::CheckSamePlace(kOp, {&out, p[0], p[1], p[2], p[3]});
  Push(kOp, args, {p[0], p[1], p[2], p[3]}, {&out}, ctx);
}

void SplitColumns(const Tensor& input, std::initializer_list<Tensor*> parts) {
  static constexpr std::string_view kOp = "SplitColumns";
  PartArray<Tensor> p{};
  ConcatArgs args = Layout(kOp, "input", input, parts, &p);
  args.direction = ConcatDirection::kFromWhole;
  const engine::Context ctx = internal::CheckSamePlace(kOp, {&input, p[0], p[1], p[2], p[3]});
  Push(kOp, args, {&input}, {p[0], p[1], p[2], p[3]}, ctx);
}

void SliceRows(const Tensor& input, int64_t first_row, Tensor& out) {
  static constexpr std::string_view kOp = "SliceRows";
  CheckOperand(kOp, "input", input);
  CheckOperand(kOp, "out", out);
  internal::CheckNotSame(kOp, "out", out, "input", input);
  const int64_t rows = input.shape()[0];
  const int64_t columns = Columns(input);
  if (Columns(out) != columns) {
    throw InvalidArgument(fmt::format(
        "[{}] `out` has shape {}; rows of `input` (shape {}) have {} "
        "columns",
        kOp, internal::ShapeString(out.shape()), internal::ShapeString(input.shape()), columns));
  }
  if (first_row < 0 || first_row > rows - out.shape()[0]) {
    throw InvalidArgument(fmt::format("[{}] rows [{}, {}) of `input`, which has {}", kOp, first_row,
                                      first_row + out.shape()[0], rows));
  }
  const engine::Context ctx = internal::CheckSamePlace(kOp, {&input, &out});
  // The slice is one contiguous run of the whole: one part of one row.
  ConcatArgs args;
  args.direction = ConcatDirection::kFromWhole;
  args.rows = 1;
  args.width = out.numel();
  args.num_parts = 1;
  args.part_width[0] = out.numel();
  args.part[0] = out.data<float>();
  args.whole = input.data<float>() + first_row * columns;
  Push(kOp, args, {&input}, {&out}, ctx);
}

}  // namespace ember::ops
