// Checks and dispatch of the loss ops (see loss.h).

#include "ops/loss.h"

#include <string_view>

#include <fmt/format.h>

#include "engine/error.h"
#include "ops/internal/dense_checks.h"
#include "ops/internal/loss_kernels.h"

namespace ember::ops {

void SigmoidBinaryCrossEntropy(const Tensor& logits, const Tensor& labels, Tensor& loss,
                               Tensor& grad_logits, int64_t mean_over) {
  static constexpr std::string_view kOp = "SigmoidBinaryCrossEntropy";
  internal::CheckF32(kOp, "logits", logits);
  internal::CheckF32(kOp, "labels", labels);
  internal::CheckF32(kOp, "loss", loss);
  internal::CheckF32(kOp, "grad_logits", grad_logits);
  if (logits.numel() == 0) {
    throw InvalidArgument(fmt::format("[{}] `logits` has shape {}; the mean of no losses", kOp,
                                      internal::ShapeString(logits.shape())));
  }
  if (mean_over != 0 && mean_over < logits.numel()) {
    throw InvalidArgument(fmt::format(
        "[{}] `mean_over` is {}: the mean of {} logits is over at least as many (0: over them)",
        kOp, mean_over, logits.numel()));
  }
  internal::CheckShape(kOp, "labels", labels, logits.shape());
  internal::CheckShape(kOp, "grad_logits", grad_logits, logits.shape());
  internal::CheckNumel(kOp, "loss", loss, 1);
  internal::CheckNotSame(kOp, "grad_logits", grad_logits, "logits", logits);
  internal::CheckNotSame(kOp, "grad_logits", grad_logits, "labels", labels);
  internal::CheckNotSame(kOp, "loss", loss, "logits", logits);
  internal::CheckNotSame(kOp, "loss", loss, "labels", labels);
  internal::CheckNotSame(kOp, "loss", loss, "grad_logits", grad_logits);
  const engine::Context ctx =
      internal::CheckSamePlace(kOp, {&logits, &labels, &loss, &grad_logits});
  const internal::LossArgs args{.n = logits.numel(),
                                .mean_over = mean_over == 0 ? logits.numel() : mean_over,
                                .logits = logits.data<float>(),
                                .labels = labels.data<float>(),
                                .loss = loss.data<float>(),
                                .grad_logits = grad_logits.data<float>()};
  internal::PushKernel(kOp, ctx, {&logits, &labels}, {&loss, &grad_logits},
                       [args, gpu = ctx.is_gpu()](void* stream) {
                         if (gpu) {
                           internal::BceCuda(args, stream, kOp);
                         } else {
                           internal::BceCpu(args);
                         }
                       });
}

void Sigmoid(const Tensor& logits, Tensor& probs) {
  static constexpr std::string_view kOp = "Sigmoid";
  internal::CheckF32(kOp, "logits", logits);
  internal::CheckF32(kOp, "probs", probs);
  internal::CheckShape(kOp, "probs", probs, logits.shape());
  const engine::Context ctx = internal::CheckSamePlace(kOp, {&logits, &probs});
  const internal::LossArgs args{
      .n = logits.numel(), .logits = logits.data<float>(), .probs = probs.data<float>()};
  internal::PushKernel(kOp, ctx, {&logits}, {&probs}, [args, gpu = ctx.is_gpu()](void* stream) {
    if (gpu) {
      internal::SigmoidCuda(args, stream, kOp);
    } else {
      internal::SigmoidCpu(args);
    }
  });
}

}  // namespace ember::ops
