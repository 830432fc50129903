// The CPU loss kernels (see ops/internal/loss_kernels.h).

#include "ops/internal/loss_kernels.h"

namespace ember::ops::internal {

// The mean is summed in double, as the CUDA kernel sums it.
void BceCpu(const LossArgs& args) {
  const auto n = static_cast<float>(args.mean_over);
  double sum = 0.0;
  for (int64_t i = 0; i < args.n; ++i) {
    const float x = args.logits[i];
    const float y = args.labels[i];
    sum += BceTerm(x, y);
    args.grad_logits[i] = SigmoidMinusLabel(x, y) / n;
  }
  args.loss[0] = static_cast<float>(sum / static_cast<double>(args.mean_over));
}

void SigmoidCpu(const LossArgs& args) {
  for (int64_t i = 0; i < args.n; ++i) args.probs[i] = StableSigmoid(args.logits[i]);
}

}  // namespace ember::ops::internal
