#include "ops/embedding_bag.h"

#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "engine/error.h"
#include "ops/internal/embedding_bag_args.h"
#include "ops/internal/embedding_bag_fault.h"
#include "ops/internal/embedding_bag_kernels.h"
#include "ops/internal/embedding_bag_upload.h"
#include "ops/internal/op_util.h"
#include "storage/storage.h"

namespace ember::ops {

using internal::TbeArgs;

TbeTables::TbeTables(std::vector<int64_t> rows, std::vector<int64_t> dims)
    : rows_(std::move(rows)), dims_(std::move(dims)) {
  if (rows_.size() != dims_.size()) {
    throw InvalidArgument(
        fmt::format("[TbeTables] {} row counts but {} dims", rows_.size(), dims_.size()));
  }
  if (rows_.empty()) throw InvalidArgument("[TbeTables] no tables");
  row_offsets_.assign(1, 0);
  weight_offsets_.assign(1, 0);
  output_offsets_.assign(1, 0);
  for (std::size_t t = 0; t < rows_.size(); ++t) {
    if (rows_[t] <= 0 || dims_[t] <= 0) {
      throw InvalidArgument(
          fmt::format("[TbeTables] table {} has {} rows of dim {}; both must be "
                      "positive",
                      t, rows_[t], dims_[t]));
    }
    int64_t elements = 0;
    if (__builtin_mul_overflow(rows_[t], dims_[t], &elements) ||
        __builtin_add_overflow(weight_offsets_.back(), elements, &elements)) {
      throw InvalidArgument(
          fmt::format("[TbeTables] table {} ({} x {}) overflows int64", t, rows_[t], dims_[t]));
    }
    row_offsets_.push_back(row_offsets_.back() + rows_[t]);
    weight_offsets_.push_back(elements);
    output_offsets_.push_back(output_offsets_.back() + dims_[t]);
  }
}

namespace internal {

const char* TbeOpName(const TbeArgs& args) {
  if (args.out != nullptr) return "EmbeddingBagForward";
  switch (args.optimizer) {
    case OptimizerKind::kSgd:
      return "EmbeddingBagBackwardSgd";
    case OptimizerKind::kRowwiseAdagrad:
      return "EmbeddingBagBackwardRowwiseAdagrad";
    case OptimizerKind::kAdam:
      return "EmbeddingBagBackwardAdam";
  }
  return "EmbeddingBag";
}

void ThrowTbeFault(const TbeArgs& args, const TbeFault& fault) {
  std::string what;
  switch (fault.kind) {
    case TbeFaultKind::kNone:
      what = "no fault (internal error: reported without one)";
      break;
    case TbeFaultKind::kFirstOffset:
      what = fmt::format("offsets[0] is {}; the first offset must be 0", fault.value);
      break;
    case TbeFaultKind::kOffsetOutOfRange:
      what = fmt::format("offsets[{}] is {}, out of range [0, {}] (the number of indices)",
                         fault.position, fault.value, fault.bound);
      break;
    case TbeFaultKind::kDecreasing:
      what = fmt::format("offsets[{}] is {}, below offsets[{}] = {}; offsets must not decrease",
                         fault.position, fault.value, fault.position - 1, fault.bound);
      break;
    case TbeFaultKind::kLastOffset:
      what = fmt::format("offsets[{}] is {}; the last offset must be the number of indices, {}",
                         fault.position, fault.value, fault.bound);
      break;
    case TbeFaultKind::kIndexOutOfRange:
      what = fmt::format("index {} is out of range [0, {}) (indices[{}])", fault.value, fault.bound,
                         fault.position);
      break;
  }
  throw InvalidArgument(
      fmt::format("[{}] table {}, bag {}: {}", TbeOpName(args), fault.table, fault.bag, what));
}

}  // namespace internal

namespace {

using internal::CheckDType;
using internal::CheckShape;
using storage::DType;

// TbeTables' per-table arrays packed in the order TbeArgs names them:
// rows (T), dims (T), then the T + 1 row, weight and output offsets. The
// pushed kernel owns a copy (shared, so that the engine may copy the
// kernel): on the CPU the kernel reads it in place; on the GPU it is
// uploaded first (ops/internal/embedding_bag_upload.h says how).
struct TableArrays {
  explicit TableArrays(const TbeTables& tables) : num_tables(tables.num_tables()) {
    const int t_count = num_tables;
    values.reserve(5 * static_cast<std::size_t>(t_count) + 3);
    for (int t = 0; t < t_count; ++t) values.push_back(tables.rows(t));
    for (int t = 0; t < t_count; ++t) values.push_back(tables.dim(t));
    for (int t = 0; t <= t_count; ++t) {
      values.push_back(t < t_count ? tables.row_offset(t) : tables.total_rows());
    }
    for (int t = 0; t <= t_count; ++t) {
      values.push_back(t < t_count ? tables.weight_offset(t) : tables.total_elements());
    }
    for (int t = 0; t <= t_count; ++t) {
      values.push_back(t < t_count ? tables.output_offset(t) : tables.total_dim());
    }
  }

  // Points args' per-table arrays into `base`, a copy of `values`.
  void PointInto(const int64_t* base, TbeArgs& args) const {
    const int64_t t_count = num_tables;
    args.rows = base;
    args.dims = base + t_count;
    args.row_offsets = base + 2 * t_count;
    args.weight_offsets = base + 3 * t_count + 1;
    args.output_offsets = base + 4 * t_count + 2;
  }

  int num_tables;
  std::vector<int64_t> values;
};

using KernelCpu = void (*)(const TbeArgs&);
using KernelCuda = void (*)(const TbeArgs&, int, void*);

// The pushed kernel: on the CPU, `cpu` on the host arrays (it validates as
// it goes); on the GPU, the arrays uploaded into a device buffer, the check
// kernel when `validate` (it waits for its verdict on this worker), then
// `cuda`. The buffer is released after the launches: the storage layer
// fences it with an event on `stream`, so it is reused only after they ran.
internal::Kernel MakeKernel(engine::Context ctx, std::shared_ptr<const TableArrays> arrays,
                            TbeArgs args, bool validate, KernelCpu cpu, KernelCuda cuda) {
  return [ctx, arrays = std::move(arrays), args, validate, cpu, cuda](void* stream) {
    TbeArgs run = args;
    if (!ctx.is_gpu()) {
      arrays->PointInto(arrays->values.data(), run);
      cpu(run);
      return;
    }
    const int device = ctx.device_id;
    const auto count = static_cast<int64_t>(arrays->values.size());
    storage::Buffer on_device = storage::GetStorage(storage::MemoryKind::kDevice, device)
                                    .Alloc(arrays->values.size() * sizeof(int64_t), stream);
    auto* base = static_cast<int64_t*>(on_device.data());
    internal::TbeUploadCuda(arrays->values.data(), count, base, device, stream);
    arrays->PointInto(base, run);
    if (validate) internal::TbeValidateCuda(run, device, stream);
    cuda(run, device, stream);
  };
}

void CheckNotNull(std::string_view op, std::string_view arg, const Tensor* tensor) {
  if (tensor == nullptr) throw InvalidArgument(fmt::format("[{}] `{}` is null", op, arg));
}

// Checks the batch against `tables` and fills args' batch fields.
void CheckBatch(std::string_view op, const TbeTables& tables, const TbeBatch& batch,
                TbeArgs& args) {
  CheckNotNull(op, "batch.indices", batch.indices);
  CheckNotNull(op, "batch.offsets", batch.offsets);
  const Tensor& indices = *batch.indices;
  const Tensor& offsets = *batch.offsets;
  CheckDType(op, "batch.indices", indices, {DType::kI32, DType::kI64});
  CheckDType(op, "batch.offsets", offsets, indices.dtype());
  if (batch.batch_size < 0) {
    throw InvalidArgument(fmt::format("[{}] `batch.batch_size` is {}; it must not be negative", op,
                                      batch.batch_size));
  }
  CheckShape(op, "batch.indices", indices, {indices.numel()});
  CheckShape(op, "batch.offsets", offsets, {tables.num_tables() * batch.batch_size + 1});
  if (batch.per_sample_weights != nullptr) {
    CheckDType(op, "batch.per_sample_weights", *batch.per_sample_weights, DType::kF32);
    CheckShape(op, "batch.per_sample_weights", *batch.per_sample_weights, {indices.numel()});
    args.per_sample_weights = batch.per_sample_weights->data<float>();
  }
  args.batch_size = batch.batch_size;
  args.num_indices = indices.numel();
  if (indices.dtype() == DType::kI32) {
    args.indices32 = indices.data<int32_t>();
    args.offsets32 = offsets.data<int32_t>();
  } else {
    args.indices64 = indices.data<int64_t>();
    args.offsets64 = offsets.data<int64_t>();
  }
}

// Checks the weights and fills args' table and weight fields.
void CheckWeights(std::string_view op, const TbeTables& tables, const Tensor& weights,
                  TbeArgs& args) {
  CheckDType(op, "weights", weights, {DType::kF32, DType::kF16, DType::kBF16});
  CheckShape(op, "weights", weights, {tables.total_elements()});
  args.num_tables = tables.num_tables();
  args.total_dim = tables.total_dim();
  args.weights = weights.data();
  switch (weights.dtype()) {
    case DType::kF16:
      args.weight_type = internal::WeightType::kF16;
      break;
    case DType::kBF16:
      args.weight_type = internal::WeightType::kBF16;
      break;
    default:
      args.weight_type = internal::WeightType::kF32;
      break;
  }
}

// The checks every backward shares; fills args but the optimizer's fields.
TbeArgs CheckBackward(std::string_view op, const TbeTables& tables, const Tensor& weights,
                      const TbeBatch& batch, const Tensor& grad_output, const TbeOptions& options) {
  TbeArgs args;
  CheckWeights(op, tables, weights, args);
  CheckBatch(op, tables, batch, args);
  CheckDType(op, "grad_output", grad_output, DType::kF32);
  CheckShape(op, "grad_output", grad_output, {batch.batch_size, tables.total_dim()});
  args.grad_output = grad_output.data<float>();
  args.mean = options.pooling == Pooling::kMean;
  args.deterministic = options.deterministic;
  return args;
}

// On a GPU, every table within what the CUDA backward takes: dims up to
// kTbeBackwardCudaMaxDim, rows up to kTbeBackwardCudaMaxRows. Only the host
// knows the shapes (the kernels see them in device memory), so the push
// refuses what the kernels would otherwise skip.
void CheckCudaBackwardLimits(std::string_view op, engine::Context ctx, const TbeTables& tables) {
  if (!ctx.is_gpu()) return;
  for (int t = 0; t < tables.num_tables(); ++t) {
    if (tables.dim(t) > internal::kTbeBackwardCudaMaxDim) {
      throw InvalidArgument(
          fmt::format("[{}] table {} has dim {}; the CUDA backward takes dims up to {}", op, t,
                      tables.dim(t), internal::kTbeBackwardCudaMaxDim));
    }
    if (tables.rows(t) > internal::kTbeBackwardCudaMaxRows) {
      throw InvalidArgument(
          fmt::format("[{}] table {} has {} rows; the CUDA backward takes up to {} rows a table",
                      op, t, tables.rows(t), internal::kTbeBackwardCudaMaxRows));
    }
  }
}

void PushBackward(std::string_view op, engine::Context ctx, const TbeTables& tables,
                  const TbeBatch& batch, const Tensor& grad_output,
                  std::initializer_list<const Tensor*> writes, const TbeArgs& args,
                  const TbeOptions& options) {
  CheckCudaBackwardLimits(op, ctx, tables);
  internal::PushKernel(
      op, ctx, {batch.indices, batch.offsets, batch.per_sample_weights, &grad_output}, writes,
      MakeKernel(ctx, std::make_shared<const TableArrays>(tables), args, options.validate,
                 &internal::TbeBackwardCpu, &internal::TbeBackwardCuda));
}

}  // namespace

void EmbeddingBagForward(const TbeTables& tables, const Tensor& weights, const TbeBatch& batch,
                         Tensor& out, const TbeOptions& options) {
  static constexpr std::string_view kOp = "EmbeddingBagForward";
  TbeArgs args;
  CheckWeights(kOp, tables, weights, args);
  CheckBatch(kOp, tables, batch, args);
  CheckDType(kOp, "out", out, DType::kF32);
  CheckShape(kOp, "out", out, {batch.batch_size, tables.total_dim()});
  const engine::Context ctx = internal::CheckSamePlace(
      kOp, {&weights, batch.indices, batch.offsets, batch.per_sample_weights, &out});
  args.out = out.data<float>();
  args.mean = options.pooling == Pooling::kMean;
  internal::PushKernel(
      kOp, ctx, {&weights, batch.indices, batch.offsets, batch.per_sample_weights}, {&out},
      MakeKernel(ctx, std::make_shared<const TableArrays>(tables), args, options.validate,
                 &internal::TbeForwardCpu, &internal::TbeForwardCuda));
}

void EmbeddingBagBackwardSgd(const TbeTables& tables, Tensor& weights, const TbeBatch& batch,
                             const Tensor& grad_output, const SgdOptions& sgd,
                             const TbeOptions& options) {
  static constexpr std::string_view kOp = "EmbeddingBagBackwardSgd";
  TbeArgs args = CheckBackward(kOp, tables, weights, batch, grad_output, options);
  args.optimizer = internal::OptimizerKind::kSgd;
  args.learning_rate = sgd.learning_rate;
  const engine::Context ctx = internal::CheckSamePlace(
      kOp, {&weights, batch.indices, batch.offsets, batch.per_sample_weights, &grad_output});
  PushBackward(kOp, ctx, tables, batch, grad_output, {&weights}, args, options);
}

void EmbeddingBagBackwardRowwiseAdagrad(const TbeTables& tables, Tensor& weights,
                                        Tensor& accumulator, const TbeBatch& batch,
                                        const Tensor& grad_output,
                                        const RowwiseAdagradOptions& adagrad,
                                        const TbeOptions& options) {
  static constexpr std::string_view kOp = "EmbeddingBagBackwardRowwiseAdagrad";
  TbeArgs args = CheckBackward(kOp, tables, weights, batch, grad_output, options);
  CheckDType(kOp, "accumulator", accumulator, DType::kF32);
  CheckShape(kOp, "accumulator", accumulator, {tables.total_rows()});
  args.optimizer = internal::OptimizerKind::kRowwiseAdagrad;
  args.learning_rate = adagrad.learning_rate;
  args.eps = adagrad.eps;
  args.accumulator = accumulator.data<float>();
  const engine::Context ctx =
      internal::CheckSamePlace(kOp, {&weights, &accumulator, batch.indices, batch.offsets,
                                     batch.per_sample_weights, &grad_output});
  PushBackward(kOp, ctx, tables, batch, grad_output, {&weights, &accumulator}, args, options);
}

void EmbeddingBagBackwardAdam(const TbeTables& tables, Tensor& weights, Tensor& m, Tensor& v,
                              const TbeBatch& batch, const Tensor& grad_output, int64_t step,
                              const AdamOptions& adam, const TbeOptions& options) {
  static constexpr std::string_view kOp = "EmbeddingBagBackwardAdam";
  TbeArgs args = CheckBackward(kOp, tables, weights, batch, grad_output, options);
  CheckDType(kOp, "m", m, DType::kF32);
  CheckShape(kOp, "m", m, {tables.total_elements()});
  CheckDType(kOp, "v", v, DType::kF32);
  CheckShape(kOp, "v", v, {tables.total_elements()});
  if (step < 1) {
    throw InvalidArgument(fmt::format("[{}] `step` is {}; steps count from 1", kOp, step));
  }
  args.optimizer = internal::OptimizerKind::kAdam;
  args.learning_rate = adam.learning_rate;
  args.beta1 = adam.beta1;
  args.beta2 = adam.beta2;
  args.eps = adam.eps;
  args.weight_decay = adam.weight_decay;
  args.step = step;
  args.adam_m = m.data<float>();
  args.adam_v = v.data<float>();
  const engine::Context ctx = internal::CheckSamePlace(
      kOp,
      {&weights, &m, &v, batch.indices, batch.offsets, batch.per_sample_weights, &grad_output});
  PushBackward(kOp, ctx, tables, batch, grad_output, {&weights, &m, &v}, args, options);
}

}  // namespace ember::ops
