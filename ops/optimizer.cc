// Checks and dispatch of the dense optimizers (see optimizer.h).

#include "ops/optimizer.h"

#include <cmath>
#include <initializer_list>
#include <string_view>

#include <fmt/format.h>

#include "engine/error.h"
#include "ops/internal/dense_checks.h"
#include "ops/internal/optimizer_kernels.h"

namespace ember::ops {
namespace {

using internal::DenseOptimizer;
using internal::OptimizerArgs;

// Throws unless lo <= value, and value < hi (open) or value <= hi.
void CheckRange(std::string_view op, std::string_view arg, float value, float lo, float hi,
                bool open_above) {
  const bool ok = std::isfinite(value) && value >= lo && (open_above ? value < hi : value <= hi);
  if (ok) return;
  throw InvalidArgument(fmt::format("[{}] `{}` is {}; expected a value in [{}, {}{}", op, arg,
                                    value, lo, hi, open_above ? ")" : "]"));
}
void CheckNonNegative(std::string_view op, std::string_view arg, float value) {
  CheckRange(op, arg, value, 0.0f, INFINITY, true);
}
void CheckPositive(std::string_view op, std::string_view arg, float value) {
  if (std::isfinite(value) && value > 0) return;
  throw InvalidArgument(
      fmt::format("[{}] `{}` is {}; expected a finite value > 0", op, arg, value));
}

// Checks `param` and `grad`, and each state against them; fills in the
// pointers and the size.
void CheckTensors(std::string_view op, Tensor& param, const Tensor& grad,
                  std::initializer_list<std::pair<std::string_view, Tensor*>> states,
                  OptimizerArgs& args) {
  internal::CheckF32(op, "param", param);
  internal::CheckF32(op, "grad", grad);
  internal::CheckShape(op, "grad", grad, param.shape());
  internal::CheckNotSame(op, "param", param, "grad", grad);
  for (const auto& [name, state] : states) {
    internal::CheckF32(op, name, *state);
    internal::CheckShape(op, name, *state, param.shape());
    internal::CheckNotSame(op, name, *state, "param", param);
    internal::CheckNotSame(op, name, *state, "grad", grad);
    internal::CheckSamePlace(op, {&param, &grad, state});
  }
  internal::CheckSamePlace(op, {&param, &grad});
  args.n = param.numel();
  args.param = param.data<float>();
  args.grad = grad.data<float>();
}

// Pushes the update on the parameter's context (CheckTensors checked that
// every tensor is there). `writes` are the parameter and its states.
void Push(std::string_view op, const Tensor& param, const Tensor& grad,
          std::initializer_list<const Tensor*> writes, const OptimizerArgs& args) {
  const engine::Context ctx = param.ctx();
  internal::PushKernel(op, ctx, {&grad}, writes, [args, op, gpu = ctx.is_gpu()](void* stream) {
    if (gpu) {
      internal::OptimizerCuda(args, stream, op);
    } else {
      internal::OptimizerCpu(args);
    }
  });
}

}  // namespace

void SgdUpdate(Tensor& param, const Tensor& grad, const DenseSgdOptions& options,
               Tensor* momentum_buffer) {
  static constexpr std::string_view kOp = "SgdUpdate";
  CheckNonNegative(kOp, "learning_rate", options.learning_rate);
  CheckRange(kOp, "momentum", options.momentum, 0.0f, 1.0f, true);
  CheckNonNegative(kOp, "weight_decay", options.weight_decay);
  if (options.momentum != 0 && momentum_buffer == nullptr) {
    throw InvalidArgument(fmt::format("[{}] `momentum_buffer` is null; momentum {} needs one", kOp,
                                      options.momentum));
  }
  OptimizerArgs args{.kind = DenseOptimizer::kSgd,
                     .learning_rate = options.learning_rate,
                     .weight_decay = options.weight_decay,
                     .momentum = options.momentum};
  if (momentum_buffer != nullptr) {
    CheckTensors(kOp, param, grad, {{"momentum_buffer", momentum_buffer}}, args);
    args.state1 = momentum_buffer->data<float>();
  } else {
    CheckTensors(kOp, param, grad, {}, args);
  }
  Push(kOp, param, grad, {&param, momentum_buffer}, args);
}

void AdagradUpdate(Tensor& param, Tensor& sum_sq, const Tensor& grad,
                   const DenseAdagradOptions& options) {
  static constexpr std::string_view kOp = "AdagradUpdate";
  CheckNonNegative(kOp, "learning_rate", options.learning_rate);
  CheckPositive(kOp, "eps", options.eps);
  CheckNonNegative(kOp, "weight_decay", options.weight_decay);
  OptimizerArgs args{.kind = DenseOptimizer::kAdagrad,
                     .learning_rate = options.learning_rate,
                     .weight_decay = options.weight_decay,
                     .eps = options.eps};
  CheckTensors(kOp, param, grad, {{"sum_sq", &sum_sq}}, args);
  args.state1 = sum_sq.data<float>();
  Push(kOp, param, grad, {&param, &sum_sq}, args);
}

void AdamUpdate(Tensor& param, Tensor& m, Tensor& v, const Tensor& grad, int64_t step,
                const DenseAdamOptions& options) {
  static constexpr std::string_view kOp = "AdamUpdate";
  CheckNonNegative(kOp, "learning_rate", options.learning_rate);
  CheckRange(kOp, "beta1", options.beta1, 0.0f, 1.0f, true);
  CheckRange(kOp, "beta2", options.beta2, 0.0f, 1.0f, true);
  CheckPositive(kOp, "eps", options.eps);
  CheckNonNegative(kOp, "weight_decay", options.weight_decay);
  if (step < 1)
    throw InvalidArgument(fmt::format("[{}] `step` is {}; steps count from 1", kOp, step));
  OptimizerArgs args{
      .kind = DenseOptimizer::kAdam,
      .learning_rate = options.learning_rate,
      .weight_decay = options.weight_decay,
      .eps = options.eps,
      .beta1 = options.beta1,
      .beta2 = options.beta2,
      .bias_correction1 = static_cast<float>(1.0 - std::pow(double{options.beta1}, step)),
      .bias_correction2 = static_cast<float>(1.0 - std::pow(double{options.beta2}, step))};
  CheckTensors(kOp, param, grad, {{"m", &m}, {"v", &v}}, args);
  internal::CheckNotSame(kOp, "v", v, "m", m);
  args.state1 = m.data<float>();
  args.state2 = v.data<float>();
  Push(kOp, param, grad, {&param, &m, &v}, args);
}

}  // namespace ember::ops
