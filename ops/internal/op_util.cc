#include "ops/internal/op_util.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/error.h"

namespace ember::ops::internal {

std::string ShapeString(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

void CheckDType(std::string_view op, std::string_view arg, const Tensor& tensor, DType dtype) {
  CheckDType(op, arg, tensor, {dtype});
}

void CheckDType(std::string_view op, std::string_view arg, const Tensor& tensor,
                std::initializer_list<DType> dtypes) {
  if (!tensor) throw InvalidArgument(fmt::format("[{}] `{}` is an empty tensor", op, arg));
  if (std::find(dtypes.begin(), dtypes.end(), tensor.dtype()) != dtypes.end()) return;
  std::string valid;
  for (DType dtype : dtypes)
    valid += fmt::format("{}{}", valid.empty() ? "" : " or ", ToString(dtype));
  throw InvalidArgument(
      fmt::format("[{}] `{}` is {}; expected {}", op, arg, ToString(tensor.dtype()), valid));
}

void CheckShape(std::string_view op, std::string_view arg, const Tensor& tensor,
                const std::vector<int64_t>& shape) {
  if (tensor.shape() == shape) return;
  throw InvalidArgument(fmt::format("[{}] `{}` has shape {}; expected {}", op, arg,
                                    ShapeString(tensor.shape()), ShapeString(shape)));
}

void CheckShape(std::string_view op, std::string_view arg, const Tensor& tensor,
                std::initializer_list<int64_t> shape) {
  if (std::equal(tensor.shape().begin(), tensor.shape().end(), shape.begin(), shape.end())) return;
  CheckShape(op, arg, tensor, std::vector<int64_t>(shape));
}

void CheckNumel(std::string_view op, std::string_view arg, const Tensor& tensor, int64_t numel) {
  if (tensor.numel() == numel) return;
  throw InvalidArgument(fmt::format("[{}] `{}` has {} elements (shape {}); expected {}", op, arg,
                                    tensor.numel(), ShapeString(tensor.shape()), numel));
}

void ThrowNoCuda(std::string_view op) {
  throw Unavailable(fmt::format("[{}] this build of Ember has no CUDA", op));
}

engine::Context CheckSamePlace(std::string_view op, std::initializer_list<const Tensor*> tensors) {
  const Tensor* first = nullptr;
  for (const Tensor* tensor : tensors) {
    if (tensor == nullptr) continue;
    if (!*tensor) throw InvalidArgument(fmt::format("[{}] an argument is an empty tensor", op));
    if (first == nullptr) {
      first = tensor;
      continue;
    }
    if (&tensor->engine() != &first->engine()) {
      throw InvalidArgument(fmt::format("[{}] the tensors belong to different engines", op));
    }
    if (tensor->ctx() != first->ctx()) {
      throw InvalidArgument(fmt::format("[{}] the tensors are on {} and {}; an op runs on one", op,
                                        first->ctx().ToString(), tensor->ctx().ToString()));
    }
  }
  if (first == nullptr) throw InvalidArgument(fmt::format("[{}] no tensors", op));
  return first->ctx();
}

namespace {

// The vars of `reads` and `writes` (null entries skipped), and their engine.
struct OpVars {
  std::vector<engine::VarHandle> reads;
  std::vector<engine::VarHandle> writes;
  engine::Engine* engine = nullptr;
};

OpVars VarsOf(std::string_view op, std::initializer_list<const Tensor*> reads,
              std::initializer_list<const Tensor*> writes) {
  OpVars vars;
  for (const Tensor* tensor : reads) {
    if (tensor == nullptr) continue;
    vars.reads.push_back(tensor->var());
    vars.engine = &tensor->engine();
  }
  for (const Tensor* tensor : writes) {
    if (tensor == nullptr) continue;
    vars.writes.push_back(tensor->var());
    vars.engine = &tensor->engine();
  }
  if (vars.engine == nullptr) throw InvalidArgument(fmt::format("[{}] no tensors", op));
  return vars;
}

}  // namespace

void PushKernel(std::string_view op, engine::Context ctx,
                std::initializer_list<const Tensor*> reads,
                std::initializer_list<const Tensor*> writes, Kernel kernel) {
  const OpVars vars = VarsOf(op, reads, writes);
  vars.engine->PushAsync(
      [kernel = std::move(kernel)](engine::RunContext rc, const engine::OnStart& on_start,
                                   const engine::OnComplete& on_complete) {
        on_start();
        kernel(rc.stream);
        on_complete();
      },
      vars.reads, vars.writes, {.ctx = ctx, .prop = engine::FnProperty::kNormal, .name = op});
}

void PushCheckedKernel(std::string_view op, engine::Context ctx,
                       std::initializer_list<const Tensor*> reads,
                       std::initializer_list<const Tensor*> writes, CheckedKernel kernel,
                       engine::FnProperty prop) {
  const OpVars vars = VarsOf(op, reads, writes);
  vars.engine->PushAsync(
      [kernel = std::move(kernel)](engine::RunContext rc, const engine::OnStart& on_start,
                                   const engine::OnComplete& on_complete) {
        on_start();
        engine::DeferredCheck check = kernel(rc.stream);
        if (check) {
          on_complete.WithCheck(std::move(check));
        } else {
          on_complete();
        }
      },
      vars.reads, vars.writes, {.ctx = ctx, .prop = prop, .name = op});
}

}  // namespace ember::ops::internal
