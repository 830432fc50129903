#pragma once

// Mlp: a stack of fully connected layers, y = x W^T + b with a ReLU after
// every layer (or every layer but the last), its parameters' gradients and
// optimizer state, all on one context. Forward, Backward and Update push
// ops (ops/matmul.h, elementwise.h, optimizer.h) and return at once; the
// engine orders them through the tensors' vars.
//
// Per layer l (sizes[l] inputs, sizes[l + 1] outputs):
//   forward   y_l = relu?(x_l W_l^T + b_l)           (ReLU in place)
//   backward  g_l = relu? ReluGrad(dy_l, y_l) : dy_l  (in place in dy_l)
//             dW_l = g_l^T x_l;  db_l = sum over rows of g_l
//             dx_l = g_l W_l     (dy_{l-1}; skipped for l = 0 without dx)
//   update    W_l, b_l by the optimizer, from dW_l, db_l
// Gradients are overwritten by each backward, not accumulated.
//
// Gradient slices. With S > 1 slices, dW_l and db_l are summed slice by
// slice: each of S equal row blocks of the batch gets its own product, and
// the S results are added in slice order, ((s0 + s1) + s2) + ... That is
// exactly what S data-parallel ranks compute with a rank-order all-reduce
// (tools/train/dist/), so one process reproduces a sharded run bit for bit.
//
// Thread safety: one thread pushes a model's ops (the pipeline's order is
// the push order).

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "ops/matmul.h"
#include "storage/tensor.h"
#include "tools/train/model_config.h"

namespace ember::train {

using storage::Tensor;

class Mlp {
 public:
  // One batch's activations: per layer its output y_l [B, sizes[l + 1]]
  // and, for l >= 1, the gradient with respect to its input
  // [B, sizes[l]]; with gradient slices, per layer and slice the slice's
  // rows of g_l and x_l.
  struct Activations {
    int64_t batch = -1;
    std::vector<Tensor> out;
    std::vector<Tensor> grad_in;
    std::vector<std::vector<Tensor>> grad_slices;
    std::vector<std::vector<Tensor>> input_slices;
  };

  // Parameters of `sizes` (inputs first, at least two entries) on `ctx`,
  // uninitialized until Initialize; their optimizer state (zeroed) as
  // `optimizer` needs. `name` prefixes the tensors' names ("bottom").
  // `grad_slices`: S above (1: one product over the whole batch).
  // `precision`: what its products may use on a GPU (ops/matmul.h).
  Mlp(engine::Engine& engine, engine::Context ctx, std::vector<int64_t> sizes, bool relu_last,
      Optimizer optimizer, std::string name, int grad_slices = 1,
      ops::MatmulPrecision precision = ops::MatmulPrecision::kFloat32);
  Mlp(const Mlp&) = delete;
  Mlp& operator=(const Mlp&) = delete;

  // Pushes the initial values: W_l ~ N(0, 2 / (in + out)), b_l ~ N(0,
  // 1 / out) (DLRM's), from counter-based streams of `seed` (the same bits
  // on every device).
  void Initialize(uint64_t seed);

  // Throws InvalidArgument when `batch` is not a multiple of the slices.
  [[nodiscard]] Activations NewActivations(int64_t batch) const;
  [[nodiscard]] const std::vector<int64_t>& sizes() const { return sizes_; }

  // x: [B, sizes[0]]; the output is act.out.back().
  void Forward(const Tensor& x, Activations& act) const;
  // dy: the gradient with respect to the output (overwritten by the
  // ReLU's gradient when relu_last); dx: the gradient with respect to x
  // ([B, sizes[0]]), or null when not needed. Writes every dW, db.
  void Backward(const Tensor& x, Activations& act, Tensor& dy, Tensor* dx);
  // One optimizer step of every parameter; `step` counts from 1 (Adam).
  void Update(const OptimizerConfig& config, int64_t step);

  // Every parameter and optimizer state tensor with its name
  // ("bottom.1.weight", "bottom.1.weight.adam_m"), in a fixed order: what
  // a checkpoint holds.
  void ForEachState(const std::function<void(const std::string&, Tensor&)>& fn);
  // Every parameter's gradient, named as its parameter, in that order:
  // what a data-parallel rank sums over the ranks before Update.
  void ForEachGradient(const std::function<void(const std::string&, Tensor&)>& fn);
  // The parameters' vars (what an update writes).
  [[nodiscard]] std::vector<engine::VarHandle> ParameterVars() const;

 private:
  struct Param {
    Tensor value;
    Tensor grad;
    Tensor state0;  // Adagrad: sum of squares; Adam: first moment
    Tensor state1;  // Adam: second moment
    Tensor part;    // with gradient slices: one slice's gradient
  };
  struct Layer {
    Param weight;  // [out, in]
    Param bias;    // [out]
  };

  Param NewParam(const std::vector<int64_t>& shape);
  // dW and db of `layer` from its output gradient g and input x.
  void ParamGrads(Layer& layer, const Tensor& g, const Tensor& x, Activations& act, std::size_t l);
  void Step(Param& param, const OptimizerConfig& config, int64_t step);

  engine::Engine& engine_;
  const engine::Context ctx_;
  const std::vector<int64_t> sizes_;
  const bool relu_last_;
  const Optimizer optimizer_;
  const std::string name_;
  const int grad_slices_;
  const ops::MatmulPrecision precision_;
  std::vector<Layer> layers_;
};

}  // namespace ember::train
