#include "storage/tensor.h"

#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/base/device.h"
#include "engine/error.h"
#include "storage/internal/tensor_copy.h"
#include "storage/storage.h"

namespace ember::storage {
namespace {

using engine::Context;
using engine::FnProperty;
using engine::OnComplete;
using engine::OnStart;
using engine::RunContext;

std::string ShapeString(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

bool IsHostKind(MemoryKind kind) { return kind == MemoryKind::kCpu || kind == MemoryKind::kPinned; }

// Host kinds on the CPU, GPU kinds on their manager's GPU.
void CheckPlacement(MemoryKind kind, int device, Context ctx) {
  const bool fits = IsHostKind(kind) ? !ctx.is_gpu() : ctx.is_gpu() && ctx.device_id == device;
  if (fits) return;
  const std::string home = IsHostKind(kind) ? "cpu" : Context::GPU(device).ToString();
  throw InvalidArgument(fmt::format("[Tensor::Empty] {} memory of {} cannot back a tensor on {}",
                                    ToString(kind), home, ctx.ToString()));
}

// The element count of `shape` and its size in bytes; throws on a negative
// dim or an overflow, since either would allocate a wrong size silently.
std::pair<int64_t, std::size_t> Extent(const std::vector<int64_t>& shape, DType dtype) {
  int64_t numel = 1;
  for (int64_t dim : shape) {
    if (dim < 0) {
      throw InvalidArgument(
          fmt::format("[Tensor::Empty] shape {} has a negative dim {}", ShapeString(shape), dim));
    }
    if (__builtin_mul_overflow(numel, dim, &numel)) numel = -1;
    if (numel < 0) break;
  }
  const std::size_t size = SizeOf(dtype);
  if (numel < 0 || static_cast<uint64_t>(numel) > std::numeric_limits<std::size_t>::max() / size) {
    throw InvalidArgument(fmt::format("[Tensor::Empty] shape {} of {} overflows the byte size",
                                      ShapeString(shape), ToString(dtype)));
  }
  return {numel, static_cast<std::size_t>(numel) * size};
}

// Which workers run a copy from `src` to `dst` (see Tensor::CopyTo).
struct CopyRoute {
  Context ctx;
  FnProperty prop;
};
CopyRoute RouteCopy(Context src, Context dst) {
  if (!src.is_gpu() && !dst.is_gpu()) return {Context::CPU(), FnProperty::kNormal};
  if (!src.is_gpu()) return {dst, FnProperty::kCopyToGPU};
  if (!dst.is_gpu() || dst.device_id != src.device_id) return {src, FnProperty::kCopyFromGPU};
  return {src, FnProperty::kNormal};
}

}  // namespace

Tensor::Tensor(Tensor&& other) noexcept
    : engine_(std::exchange(other.engine_, nullptr)),
      var_(std::exchange(other.var_, {})),
      buffer_(std::move(other.buffer_)),
      shape_(std::move(other.shape_)),
      dtype_(other.dtype_),
      ctx_(other.ctx_),
      kind_(other.kind_),
      numel_(std::exchange(other.numel_, 0)),
      bytes_(std::exchange(other.bytes_, 0)) {}

Tensor& Tensor::operator=(Tensor&& other) noexcept {
  if (this != &other) {
    Release();
    engine_ = std::exchange(other.engine_, nullptr);
    var_ = std::exchange(other.var_, {});
    buffer_ = std::move(other.buffer_);
    shape_ = std::move(other.shape_);
    dtype_ = other.dtype_;
    ctx_ = other.ctx_;
    kind_ = other.kind_;
    numel_ = std::exchange(other.numel_, 0);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

Tensor Tensor::Empty(engine::Engine& engine, std::vector<int64_t> shape, DType dtype, Context ctx,
                     std::optional<MemoryKind> kind) {
  const MemoryKind chosen = kind.value_or(ctx.is_gpu() ? MemoryKind::kDevice : MemoryKind::kCpu);
  // Checked before GetStorage, so that a misplaced kind is reported as such
  // rather than as a missing device.
  CheckPlacement(chosen, IsHostKind(chosen) ? -1 : ctx.device_id, ctx);
  const int device = chosen == MemoryKind::kPinned ? engine.options().host_memory_gpu
                     : ctx.is_gpu()                ? ctx.device_id
                                                   : 0;
  StorageManager& manager = GetStorage(chosen, device);
  return Empty(engine, manager, std::move(shape), dtype, ctx);
}

Tensor Tensor::Empty(engine::Engine& engine, StorageManager& manager, std::vector<int64_t> shape,
                     DType dtype, Context ctx) {
  CheckPlacement(manager.kind(), manager.device(), ctx);
  const auto [numel, bytes] = Extent(shape, dtype);
  Tensor tensor;
  tensor.buffer_ = std::make_shared<Buffer>(manager.Alloc(bytes));
  tensor.engine_ = &engine;
  tensor.var_ = engine.NewVariable();
  tensor.shape_ = std::move(shape);
  tensor.dtype_ = dtype;
  tensor.ctx_ = ctx;
  tensor.kind_ = manager.kind();
  tensor.numel_ = numel;
  tensor.bytes_ = bytes;
  if (tensor.buffer_->has_pending()) tensor.PushFirstUse();
  return tensor;
}

// The op's stream waits for the previous owners' fences: no host block on a
// GPU context. On the CPU (no GPU at all) a worker host-waits instead.
void Tensor::PushFirstUse() {
  engine_->PushAsync(
      [buffer = buffer_](RunContext rc, const OnStart& start, const OnComplete& done) {
        start();
        buffer->OrderFirstUse(rc.stream);
        done();
      },
      {}, {var_}, {.ctx = FenceContext(), .name = "Tensor::OrderFirstUse"});
}

Context Tensor::FenceContext() const {
  switch (kind_) {
    case MemoryKind::kDevice:
    case MemoryKind::kUvm:
      return ctx_;
    case MemoryKind::kPinned:
      return GpuCount() > 0 ? Context::GPU(engine_->options().host_memory_gpu) : Context::CPU();
    case MemoryKind::kCpu:
      break;
  }
  return Context::CPU();
}

// On a GPU context the deletion op's stream has waited for every earlier
// user of the var (Async engines; the plain ones host-synced each), so one
// fence recorded on it orders the buffer's reuse after all of them.
void Tensor::Release() noexcept {
  if (engine_ == nullptr) return;
  std::shared_ptr<Buffer> buffer = std::move(buffer_);
  try {
    engine_->DeleteVariable(
        var_,
        [buffer](RunContext rc) {
          buffer->RecordUse(rc.stream);
          buffer->Reset();
        },
        FenceContext());
  } catch (...) {
    // The var could not be deleted (an engine unusable after fork()), so ops
    // may still use the buffer: leaking it beats handing it out under them.
    (void)new std::shared_ptr<Buffer>(std::move(buffer));
  }
  engine_ = nullptr;
  var_ = {};
}

void Tensor::CheckDType(DType requested) const {
  if (requested == dtype_) return;
  throw InvalidArgument(fmt::format("[Tensor::data] tensor {} of dtype {} read as {}",
                                    ShapeString(shape_), ToString(dtype_), ToString(requested)));
}

void Tensor::CheckUsable(std::string_view where) const {
  if (engine_ == nullptr) throw UsageError(fmt::format("[{}] the tensor is empty", where));
}

void Tensor::WaitToRead() const {
  CheckUsable("Tensor::WaitToRead");
  engine_->WaitForVar(var_);
}

void Tensor::WaitToWrite() const {
  CheckUsable("Tensor::WaitToWrite");
  engine_->PushAsync(
      [](RunContext, const OnStart& start, const OnComplete& done) {
        start();
        done();
      },
      {}, {var_}, {.ctx = ctx_, .name = "Tensor::WaitToWrite"});
  engine_->WaitForVar(var_);
}

void Tensor::CopyTo(Tensor& dst) const {
  CheckUsable("Tensor::CopyTo");
  dst.CheckUsable("Tensor::CopyTo");
  const std::string what = fmt::format("src {} {} on {} to dst {} {} on {}", ShapeString(shape_),
                                       ToString(dtype_), ctx_.ToString(), ShapeString(dst.shape_),
                                       ToString(dst.dtype_), dst.ctx_.ToString());
  if (numel_ != dst.numel_ || dtype_ != dst.dtype_) {
    throw InvalidArgument(fmt::format("[Tensor::CopyTo] {}: numel or dtype differ", what));
  }
  if (var_ == dst.var_)
    throw InvalidArgument(fmt::format("[Tensor::CopyTo] {}: same tensor", what));
  if (engine_ != dst.engine_) {
    throw InvalidArgument(fmt::format("[Tensor::CopyTo] {}: tensors of two engines", what));
  }
  if (bytes_ == 0) return;
  const CopyRoute route = RouteCopy(ctx_, dst.ctx_);
  const std::string name = fmt::format("copy {}->{}", ctx_.ToString(), dst.ctx_.ToString());
  const void* src_data = data();
  void* dst_data = dst.data();
  const std::size_t bytes = bytes_;
  if (!route.ctx.is_gpu()) {
    engine_->PushSync([=](RunContext) { std::memcpy(dst_data, src_data, bytes); }, {var_},
                      {dst.var_}, {.ctx = route.ctx, .prop = route.prop, .name = name});
    return;
  }
  // Device memory of a GPU is named by its id (peer copies); anything the
  // host can address goes through unified addressing.
  const int src_device = kind_ == MemoryKind::kDevice ? ctx_.device_id : -1;
  const int dst_device = dst.kind_ == MemoryKind::kDevice ? dst.ctx_.device_id : -1;
  engine_->PushAsync(
      [=](RunContext rc, const OnStart& start, const OnComplete& done) {
        start();
        internal::CopyAsync(dst_data, dst_device, src_data, src_device, bytes, rc.stream,
                            rc.op_name);
        done();
      },
      {var_}, {dst.var_}, {.ctx = route.ctx, .prop = route.prop, .name = name});
}

}  // namespace ember::storage
