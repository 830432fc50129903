// Checks and dispatch of the TBE ops (embedding_bag.h): the push functions
// check their tensors and push one engine op whose kernel runs the CPU
// kernel, or on a GPU the host-planned CUDA kernels and, with validation,
// the check whose verdict the engine reads later (ops/internal/tbe_fault.h).

#include "ops/embedding_bag.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "engine/error.h"
#include "ops/internal/embedding_bag_args.h"
#include "ops/internal/embedding_bag_fault.h"
#include "ops/internal/embedding_bag_kernels.h"
#include "ops/internal/op_util.h"
#include "ops/internal/tbe_device_tables.h"
#include "ops/internal/tbe_fault.h"
#include "ops/internal/tbe_plan.h"
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
  device_tables_ = std::make_shared<internal::TbeDeviceTables>(*this);
}

namespace {

using internal::CheckDType;
using internal::CheckShape;
using storage::DType;

using internal::TbeDeviceTables;

// Where a GPU op gets its memory (embedding_bag.h, "GPU memory").
struct GpuMemory {
  storage::StorageManager* device = nullptr;
  storage::StorageManager* pinned = nullptr;  // null without validation
};

// A GPU op's run: its device, stream and memory, and whether it validates.
struct GpuRun {
  int device;
  void* stream;
  GpuMemory memory;
  bool validate;
};

using KernelCpu = void (*)(const TbeArgs&);
// Launches on run.stream (args' per-table arrays on the device) and returns
// the op's deferred check (empty without validation).
using KernelGpu = engine::DeferredCheck (*)(const TbeArgs&, const TbeDeviceTables&, const GpuRun&);

// With validation the forward marks bad bags as it reads them: no pass
// of its own (tbe_fault.h).
engine::DeferredCheck ForwardGpu(const TbeArgs& args, const TbeDeviceTables& /*tables*/,
                                 const GpuRun& run) {
  std::optional<internal::TbeGpuValidation> validation;
  if (run.validate) validation.emplace(args, run.device, run.stream, *run.memory.pinned);
  internal::TbeForwardCuda(args, validation ? validation->first_bad() : nullptr, run.device,
                           run.stream);
  return validation ? validation->Finish(internal::TbeOpName(args)) : engine::DeferredCheck();
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The host plans the backward (one register shape, its chunking), so that
// only the kernels it needs are launched. With validation, the bad bags are
// marked first and the backward skips a bad batch on the device.
engine::DeferredCheck BackwardGpu(const TbeArgs& args, const TbeDeviceTables& tables,
                                  const GpuRun& run) {
  std::optional<internal::TbeGpuValidation> validation;
  if (run.validate) {
    validation.emplace(args, run.device, run.stream, *run.memory.pinned);
    validation->MarkBadBags();
  }
  const bool aligned = Aligned16(args.grad_output) && Aligned16(args.weights);
  const internal::TbeBackwardPlan plan =
      internal::PlanTbeBackward(tables.summary(), args.total_dim, args.num_indices, aligned);
  internal::TbeBackwardCuda(args, plan, validation ? validation->first_bad() : nullptr,
                            *run.memory.device, run.device, run.stream);
  return validation ? validation->Finish(internal::TbeOpName(args)) : engine::DeferredCheck();
}

// The pushed kernel: on the CPU, `cpu` on the host arrays (it validates as
// it goes); on the GPU, `gpu` on the tables' GPU copy (made by the first op
// there; `read` notes, once the kernels are launched, that they read it).
// The kernel shares the tables' arrays, so that they outlive the op even if
// the TbeTables does not.
internal::CheckedKernel MakeKernel(engine::Context ctx, const TbeTables& tables,
                                   const TbeArgs& args, const GpuMemory& memory, bool validate,
                                   KernelCpu cpu, KernelGpu gpu) {
  return [ctx, device_tables = internal::TbeTablesAccess::DeviceTables(tables), args, memory,
          validate, cpu, gpu](void* stream) -> engine::DeferredCheck {
    TbeArgs run = args;
    if (!ctx.is_gpu()) {
      device_tables->PointAtHost(run);
      cpu(run);
      return {};
    }
    const TbeDeviceTables::DeviceRead read(*device_tables, run, ctx.device_id, stream,
                                           *memory.device);
    return gpu(run, *device_tables, GpuRun{ctx.device_id, stream, memory, validate});
  };
}

// The managers of a GPU op (embedding_bag.h, "GPU memory"): the options',
// checked, or the process-wide ones, looked up here at push rather than in
// the kernel. Nothing on the CPU.
GpuMemory MemoryFor(std::string_view op, engine::Context ctx, const TbeOptions& options) {
  GpuMemory memory;
  if (!ctx.is_gpu()) return memory;
  memory.device = options.device_memory != nullptr
                      ? options.device_memory
                      : &storage::GetStorage(storage::MemoryKind::kDevice, ctx.device_id);
  if (memory.device->kind() != storage::MemoryKind::kDevice ||
      memory.device->device() != ctx.device_id) {
    throw InvalidArgument(fmt::format(
        "[{}] `options.device_memory` is {} memory of device {}; the op runs on {} and needs "
        "its kDevice memory",
        op, storage::ToString(memory.device->kind()), memory.device->device(), ctx.ToString()));
  }
  if (!options.validate) return memory;
  memory.pinned = options.pinned_memory != nullptr
                      ? options.pinned_memory
                      : &storage::GetStorage(storage::MemoryKind::kPinned, ctx.device_id);
  if (memory.pinned->kind() != storage::MemoryKind::kPinned) {
    throw InvalidArgument(fmt::format("[{}] `options.pinned_memory` is {} memory; expected kPinned",
                                      op, storage::ToString(memory.pinned->kind())));
  }
  return memory;
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
  // With no bags no index belongs to any: they would be dropped unread.
  if (tables.num_tables() * batch.batch_size == 0 && indices.numel() != 0) {
    throw InvalidArgument(
        fmt::format("[{}] the batch has no bags (batch_size {}, {} tables) but {} "
                    "indices; the last offset must equal the number of indices",
                    op, batch.batch_size, tables.num_tables(), indices.numel()));
  }
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
// kTbeBackwardCudaMaxDim, rows up to kTbeBackwardCudaMaxRows. The push
// refuses the others, naming the table, before anything runs.
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

// The slots a backward writes, when it has any.
const Tensor* SlotsOf(const TbeCachedRows* cached) {
  return cached != nullptr ? cached->slots : nullptr;
}
// The slots' dirty flags a backward writes, when it keeps any.
const Tensor* DirtyOf(const TbeCachedRows* cached) {
  return cached != nullptr ? cached->dirty : nullptr;
}

// Checks `cached` (null: none) against the op's tensors (one context) and
// points args at it.
void CheckCached(std::string_view op, const TbeTables& tables, const Tensor& weights,
                 const TbeBatch& batch, const TbeCachedRows* cached, TbeArgs& args) {
  if (cached == nullptr) return;
  CheckNotNull(op, "cached->locations", cached->locations);
  CheckNotNull(op, "cached->slots", cached->slots);
  const Tensor& locations = *cached->locations;
  const Tensor& slots = *cached->slots;
  CheckDType(op, "cached->locations", locations, DType::kI32);
  if (locations.numel() < batch.indices->numel()) {
    throw InvalidArgument(fmt::format("[{}] `cached->locations` has {} entries for {} indices", op,
                                      locations.numel(), batch.indices->numel()));
  }
  CheckDType(op, "cached->slots", slots, weights.dtype());
  int64_t max_dim = 0;
  for (int t = 0; t < tables.num_tables(); ++t) max_dim = std::max(max_dim, tables.dim(t));
  if (slots.shape().size() != 2 || slots.shape()[1] < max_dim) {
    throw InvalidArgument(
        fmt::format("[{}] `cached->slots` has shape {}; expected [slots, dim] with dim >= {} (the "
                    "widest table)",
                    op, internal::ShapeString(slots.shape()), max_dim));
  }
  if (cached->dirty != nullptr) {
    CheckDType(op, "cached->dirty", *cached->dirty, DType::kI32);
    if (cached->dirty->numel() < slots.shape()[0]) {
      throw InvalidArgument(fmt::format("[{}] `cached->dirty` has {} flags for {} slots", op,
                                        cached->dirty->numel(), slots.shape()[0]));
    }
    args.slot_dirty = cached->dirty->data<int32_t>();
  }
  internal::CheckSamePlace(op, {&weights, &locations, &slots, cached->order_after, cached->dirty});
  args.locations = locations.data<int32_t>();
  args.slots = slots.data();
  args.slot_stride = slots.shape()[1];
}

void PushBackward(std::string_view op, engine::Context ctx, const TbeTables& tables,
                  const TbeBatch& batch, const Tensor& grad_output,
                  std::initializer_list<const Tensor*> writes, const TbeArgs& args,
                  const TbeOptions& options, const TbeCachedRows* cached) {
  CheckCudaBackwardLimits(op, ctx, tables);
  const Tensor* locations = cached != nullptr ? cached->locations : nullptr;
  internal::PushCheckedKernel(
      op, ctx, {batch.indices, batch.offsets, batch.per_sample_weights, &grad_output, locations},
      writes,
      MakeKernel(ctx, tables, args, MemoryFor(op, ctx, options), options.validate,
                 &internal::TbeBackwardCpu, &BackwardGpu),
      options.property);
}

}  // namespace

void ValidateTbeBatch(const TbeTables& tables, const TbeBatch& batch) {
  static constexpr std::string_view kOp = "ValidateTbeBatch";
  TbeArgs args;
  CheckBatch(kOp, tables, batch, args);
  const engine::Context ctx =
      internal::CheckSamePlace(kOp, {batch.indices, batch.offsets, batch.per_sample_weights});
  if (ctx.is_gpu()) {
    throw InvalidArgument(fmt::format(
        "[{}] the batch is on {}; this checks host tensors (before their upload), a GPU op "
        "checks its batch with TbeOptions::validate",
        kOp, ctx.ToString()));
  }
  args.num_tables = tables.num_tables();
  internal::TbeTablesAccess::DeviceTables(tables)->PointAtHost(args);
  const internal::TbeFault fault = internal::FirstTbeFault(args);
  if (fault.kind != internal::TbeFaultKind::kNone) {
    throw InvalidArgument(internal::DescribeTbeFault(kOp, fault));
  }
}

void EmbeddingBagForward(const TbeTables& tables, const Tensor& weights, const TbeBatch& batch,
                         Tensor& out, const TbeOptions& options, const TbeCachedRows* cached) {
  static constexpr std::string_view kOp = "EmbeddingBagForward";
  TbeArgs args;
  CheckWeights(kOp, tables, weights, args);
  CheckBatch(kOp, tables, batch, args);
  CheckDType(kOp, "out", out, DType::kF32);
  CheckShape(kOp, "out", out, {batch.batch_size, tables.total_dim()});
  const engine::Context ctx = internal::CheckSamePlace(
      kOp, {&weights, batch.indices, batch.offsets, batch.per_sample_weights, &out});
  CheckCached(kOp, tables, weights, batch, cached, args);
  args.out = out.data<float>();
  args.mean = options.pooling == Pooling::kMean;
  const bool has = cached != nullptr;
  internal::PushCheckedKernel(kOp, ctx,
                              {&weights, batch.indices, batch.offsets, batch.per_sample_weights,
                               has ? cached->locations : nullptr, has ? cached->slots : nullptr,
                               has ? cached->order_after : nullptr},
                              {&out},
                              MakeKernel(ctx, tables, args, MemoryFor(kOp, ctx, options),
                                         options.validate, &internal::TbeForwardCpu, &ForwardGpu),
                              options.property);
}

void EmbeddingBagBackwardSgd(const TbeTables& tables, Tensor& weights, const TbeBatch& batch,
                             const Tensor& grad_output, const SgdOptions& sgd,
                             const TbeOptions& options, const TbeCachedRows* cached) {
  static constexpr std::string_view kOp = "EmbeddingBagBackwardSgd";
  TbeArgs args = CheckBackward(kOp, tables, weights, batch, grad_output, options);
  args.optimizer = internal::OptimizerKind::kSgd;
  args.learning_rate = sgd.learning_rate;
  const engine::Context ctx = internal::CheckSamePlace(
      kOp, {&weights, batch.indices, batch.offsets, batch.per_sample_weights, &grad_output});
  CheckCached(kOp, tables, weights, batch, cached, args);
  PushBackward(kOp, ctx, tables, batch, grad_output, {&weights, SlotsOf(cached), DirtyOf(cached)},
               args, options, cached);
}

void EmbeddingBagBackwardRowwiseAdagrad(const TbeTables& tables, Tensor& weights,
                                        Tensor& accumulator, const TbeBatch& batch,
                                        const Tensor& grad_output,
                                        const RowwiseAdagradOptions& adagrad,
                                        const TbeOptions& options, const TbeCachedRows* cached) {
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
  CheckCached(kOp, tables, weights, batch, cached, args);
  PushBackward(kOp, ctx, tables, batch, grad_output,
               {&weights, &accumulator, SlotsOf(cached), DirtyOf(cached)}, args, options, cached);
}

void EmbeddingBagBackwardAdam(const TbeTables& tables, Tensor& weights, Tensor& m, Tensor& v,
                              const TbeBatch& batch, const Tensor& grad_output, int64_t step,
                              const AdamOptions& adam, const TbeOptions& options,
                              const TbeCachedRows* cached) {
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
  CheckCached(kOp, tables, weights, batch, cached, args);
  PushBackward(kOp, ctx, tables, batch, grad_output,
               {&weights, &m, &v, SlotsOf(cached), DirtyOf(cached)}, args, options, cached);
}

}  // namespace ember::ops
