// Checks and dispatch of the dot interaction (see interaction.h).

#include "ops/interaction.h"

#include <string_view>

#include "ops/internal/dense_checks.h"
#include "ops/internal/interaction_kernels.h"

namespace ember::ops {
namespace {

using internal::InteractionArgs;

// The dimensions of a checked [B, F, D] input.
InteractionArgs Dims(std::string_view op, const Tensor& input) {
  internal::CheckF32Rank(op, "input", input, 3);
  return {.batch = input.shape()[0],
          .features = input.shape()[1],
          .dim = input.shape()[2],
          .input = input.data<float>()};
}

}  // namespace

void DotInteraction(const Tensor& input, Tensor& output) {
  static constexpr std::string_view kOp = "DotInteraction";
  InteractionArgs args = Dims(kOp, input);
  internal::CheckF32(kOp, "output", output);
  internal::CheckShape(kOp, "output", output, {args.batch, internal::NumPairs(args.features)});
  internal::CheckNotSame(kOp, "output", output, "input", input);
  const engine::Context ctx = internal::CheckSamePlace(kOp, {&input, &output});
  args.output = output.data<float>();
  internal::PushKernel(kOp, ctx, {&input}, {&output}, [args, gpu = ctx.is_gpu()](void* stream) {
    if (gpu) {
      internal::InteractionForwardCuda(args, stream, kOp);
    } else {
      internal::InteractionForwardCpu(args);
    }
  });
}

void DotInteractionBackward(const Tensor& input, const Tensor& grad_output, Tensor& grad_input) {
  static constexpr std::string_view kOp = "DotInteractionBackward";
  InteractionArgs args = Dims(kOp, input);
  internal::CheckF32(kOp, "grad_output", grad_output);
  internal::CheckF32(kOp, "grad_input", grad_input);
  internal::CheckShape(kOp, "grad_output", grad_output,
                       {args.batch, internal::NumPairs(args.features)});
  internal::CheckShape(kOp, "grad_input", grad_input, input.shape());
  internal::CheckNotSame(kOp, "grad_input", grad_input, "input", input);
  internal::CheckNotSame(kOp, "grad_input", grad_input, "grad_output", grad_output);
  const engine::Context ctx = internal::CheckSamePlace(kOp, {&input, &grad_output, &grad_input});
  args.grad_output = grad_output.data<float>();
  args.grad_input = grad_input.data<float>();
  internal::PushKernel(kOp, ctx, {&input, &grad_output}, {&grad_input},
                       [args, gpu = ctx.is_gpu()](void* stream) {
                         if (gpu) {
                           internal::InteractionBackwardCuda(args, stream, kOp);
                         } else {
                           internal::InteractionBackwardCpu(args);
                         }
                       });
}

}  // namespace ember::ops
