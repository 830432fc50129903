#include "tools/train/mlp.h"

#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "engine/error.h"
#include "ops/concat.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"
#include "ops/optimizer.h"

namespace ember::train {

Mlp::Mlp(engine::Engine& engine, engine::Context ctx, std::vector<int64_t> sizes, bool relu_last,
         Optimizer optimizer, std::string name, int grad_slices, ops::MatmulPrecision precision)
    : engine_(engine),
      ctx_(ctx),
      sizes_(std::move(sizes)),
      relu_last_(relu_last),
      optimizer_(optimizer),
      name_(std::move(name)),
      grad_slices_(grad_slices),
      precision_(precision) {
  if (sizes_.size() < 2) {
    throw InvalidArgument(fmt::format(
        "[Mlp] {}: {} sizes; an MLP needs its input and at least one layer", name_, sizes_.size()));
  }
  if (grad_slices_ < 1) {
    throw InvalidArgument(
        fmt::format("[Mlp] {}: {} gradient slices; expected at least 1", name_, grad_slices_));
  }
  for (std::size_t l = 0; l + 1 < sizes_.size(); ++l) {
    Layer layer;
    layer.weight = NewParam({sizes_[l + 1], sizes_[l]});
    layer.bias = NewParam({sizes_[l + 1]});
    layers_.push_back(std::move(layer));
  }
}

Mlp::Param Mlp::NewParam(const std::vector<int64_t>& shape) {
  Param p;
  p.value = Tensor::Empty(engine_, shape, storage::DType::kF32, ctx_);
  p.grad = Tensor::Empty(engine_, shape, storage::DType::kF32, ctx_);
  if (optimizer_ != Optimizer::kSgd) {
    p.state0 = Tensor::Empty(engine_, shape, storage::DType::kF32, ctx_);
    ops::Fill(p.state0, 0.0f);
  }
  if (optimizer_ == Optimizer::kAdam) {
    p.state1 = Tensor::Empty(engine_, shape, storage::DType::kF32, ctx_);
    ops::Fill(p.state1, 0.0f);
  }
  if (grad_slices_ > 1) p.part = Tensor::Empty(engine_, shape, storage::DType::kF32, ctx_);
  return p;
}

void Mlp::Initialize(uint64_t seed) {
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    const double in = static_cast<double>(sizes_[l]);
    const double out = static_cast<double>(sizes_[l + 1]);
    // One stream per tensor: RandomBits(seed, k) as the k-th tensor's seed.
    ops::RandomNormal(layers_[l].weight.value, ops::RandomBits(seed, 2 * l), 0.0f,
                      static_cast<float>(std::sqrt(2.0 / (in + out))));
    ops::RandomNormal(layers_[l].bias.value, ops::RandomBits(seed, 2 * l + 1), 0.0f,
                      static_cast<float>(std::sqrt(1.0 / out)));
  }
}

Mlp::Activations Mlp::NewActivations(int64_t batch) const {
  if (batch % grad_slices_ != 0) {
    throw InvalidArgument(fmt::format("[Mlp] {}: a batch of {} examples in {} gradient slices",
                                      name_, batch, grad_slices_));
  }
  auto f32 = [&](int64_t rows, int64_t columns) {
    return Tensor::Empty(engine_, {rows, columns}, storage::DType::kF32, ctx_);
  };
  Activations act;
  act.batch = batch;
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    act.out.push_back(f32(batch, sizes_[l + 1]));
    // grad_in[0] stays empty: the caller owns dx of the first layer.
    act.grad_in.push_back(l == 0 ? Tensor() : f32(batch, sizes_[l]));
    if (grad_slices_ == 1) continue;
    const int64_t rows = batch / grad_slices_;
    act.grad_slices.emplace_back();
    act.input_slices.emplace_back();
    for (int s = 0; s < grad_slices_; ++s) {
      act.grad_slices[l].push_back(f32(rows, sizes_[l + 1]));
      act.input_slices[l].push_back(f32(rows, sizes_[l]));
    }
  }
  return act;
}

void Mlp::Forward(const Tensor& x, Activations& act) const {
  const Tensor* input = &x;
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    Tensor& y = act.out[l];
    ops::Matmul(*input, layers_[l].weight.value, y, /*transpose_a=*/false, /*transpose_b=*/true,
                1.0f, 0.0f, precision_);
    if (l + 1 < layers_.size() || relu_last_) {
      ops::AddBiasRelu(y, layers_[l].bias.value);
    } else {
      ops::AddBias(y, layers_[l].bias.value);
    }
    input = &y;
  }
}

void Mlp::Backward(const Tensor& x, Activations& act, Tensor& dy, Tensor* dx) {
  Tensor* g = &dy;
  for (std::size_t l = layers_.size(); l-- > 0;) {
    Layer& layer = layers_[l];
    // ReLU's gradient in place: g_l = dy_l where y_l > 0 (y_l is the
    // in-place ReLU's output, positive exactly where its input was).
    if (l + 1 < layers_.size() || relu_last_) ops::ReluGrad(*g, act.out[l], *g);
    ParamGrads(layer, *g, l == 0 ? x : act.out[l - 1], act, l);
    Tensor* grad_in = l == 0 ? dx : &act.grad_in[l];
    if (grad_in != nullptr) {
      ops::Matmul(*g, layer.weight.value, *grad_in, false, false, 1.0f, 0.0f, precision_);
    }
    g = grad_in;
  }
}

void Mlp::ParamGrads(Layer& layer, const Tensor& g, const Tensor& x, Activations& act,
                     std::size_t l) {
  if (grad_slices_ == 1) {
    ops::Matmul(g, x, layer.weight.grad, /*transpose_a=*/true, false, 1.0f, 0.0f, precision_);
    ops::BiasGrad(g, layer.bias.grad);
    return;
  }
  const int64_t rows = act.batch / grad_slices_;
  for (int s = 0; s < grad_slices_; ++s) {
    Tensor& g_s = act.grad_slices[l][s];
    Tensor& x_s = act.input_slices[l][s];
    ops::SliceRows(g, s * rows, g_s);
    ops::SliceRows(x, s * rows, x_s);
    Tensor& dw = s == 0 ? layer.weight.grad : layer.weight.part;
    Tensor& db = s == 0 ? layer.bias.grad : layer.bias.part;
    ops::Matmul(g_s, x_s, dw, /*transpose_a=*/true, false, 1.0f, 0.0f, precision_);
    ops::BiasGrad(g_s, db);
    if (s == 0) continue;
    ops::Add(layer.weight.grad, dw, layer.weight.grad);
    ops::Add(layer.bias.grad, db, layer.bias.grad);
  }
}

void Mlp::Step(Param& param, const OptimizerConfig& config, int64_t step) {
  switch (optimizer_) {
    case Optimizer::kSgd:
      ops::SgdUpdate(param.value, param.grad, {.learning_rate = config.dense_lr});
      return;
    case Optimizer::kAdagrad:
      ops::AdagradUpdate(param.value, param.state0, param.grad,
                         {.learning_rate = config.dense_lr, .eps = config.eps});
      return;
    case Optimizer::kAdam:
      ops::AdamUpdate(param.value, param.state0, param.state1, param.grad, step,
                      {.learning_rate = config.dense_lr,
                       .beta1 = config.beta1,
                       .beta2 = config.beta2,
                       .eps = config.eps});
      return;
  }
}

void Mlp::Update(const OptimizerConfig& config, int64_t step) {
  for (Layer& layer : layers_) {
    Step(layer.weight, config, step);
    Step(layer.bias, config, step);
  }
}

void Mlp::ForEachState(const std::function<void(const std::string&, Tensor&)>& fn) {
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    for (auto [kind, param] :
         {std::pair{"weight", &layers_[l].weight}, std::pair{"bias", &layers_[l].bias}}) {
      const std::string name = fmt::format("{}.{}.{}", name_, l, kind);
      fn(name, param->value);
      if (optimizer_ == Optimizer::kAdagrad) fn(name + ".sum_sq", param->state0);
      if (optimizer_ == Optimizer::kAdam) {
        fn(name + ".adam_m", param->state0);
        fn(name + ".adam_v", param->state1);
      }
    }
  }
}

void Mlp::ForEachGradient(const std::function<void(const std::string&, Tensor&)>& fn) {
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    fn(fmt::format("{}.{}.weight", name_, l), layers_[l].weight.grad);
    fn(fmt::format("{}.{}.bias", name_, l), layers_[l].bias.grad);
  }
}

std::vector<engine::VarHandle> Mlp::ParameterVars() const {
  std::vector<engine::VarHandle> vars;
  for (const Layer& layer : layers_) {
    vars.push_back(layer.weight.value.var());
    vars.push_back(layer.bias.value.var());
  }
  return vars;
}

}  // namespace ember::train
