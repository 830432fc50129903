#include "tools/train/dist/pooled_exchange.h"

#include <span>
#include <utility>
#include <vector>

#include "tools/train/dist/pooled_exchange_kernels.h"

namespace ember::train {
namespace {

using storage::DType;
using storage::Tensor;

template <typename T>
std::span<T> Span(const Tensor& t) {
  return {t.data<std::remove_const_t<T>>(), static_cast<size_t>(t.numel())};
}

// The plan's arrays, one after another, in DeviceColumnPlan's order.
std::vector<int32_t> Flatten(const ShardLayout::ColumnPlan& plan) {
  std::vector<int32_t> all;
  for (const std::vector<int32_t>* part :
       {&plan.first_column, &plan.owner, &plan.out_column, &plan.sources_begin, &plan.sources}) {
    all.insert(all.end(), part->begin(), part->end());
  }
  return all;
}

// DeviceColumnPlan over Flatten's arrays at `base` (device memory).
DeviceColumnPlan View(const ShardLayout& layout, const int32_t* base) {
  const int ranks = layout.ranks();
  int64_t columns = 0;
  for (int p = 0; p < ranks; ++p) columns += layout.owned_dim(p);
  DeviceColumnPlan plan{};
  plan.ranks = ranks;
  plan.columns = columns;
  plan.total_dim = layout.total_dim();
  plan.local_batch = layout.local_batch();
  plan.by_four = true;
  for (int t = 0; t < layout.num_tables(); ++t) {
    plan.by_four = plan.by_four && layout.dim(t) % 4 == 0;
  }
  plan.first_column = base;
  plan.owner = plan.first_column + ranks + 1;
  plan.out_column = plan.owner + columns;
  plan.sources_begin = plan.out_column + columns;
  plan.sources = plan.sources_begin + plan.total_dim + 1;
  return plan;
}

}  // namespace

PooledExchange::PooledExchange(engine::Engine& engine, const ShardLayout& layout,
                               engine::Context ctx)
    : engine_(engine), layout_(layout), ctx_(ctx) {
  if (!ctx.is_gpu()) return;
  const std::vector<int32_t> flat = Flatten(layout.Columns());
  Tensor host = Tensor::Empty(engine, {static_cast<int64_t>(flat.size())}, DType::kI32,
                              engine::Context::CPU());
  host.WaitToWrite();
  std::ranges::copy(flat, host.data<int32_t>());
  plan_ = Tensor::Empty(engine, host.shape(), DType::kI32, ctx);
  host.CopyTo(plan_);
}

void PooledExchange::Unpack(const Tensor& received, Tensor& out) {
  PushMove("PooledExchange::Unpack", received, out, LaunchUnpackPooled, &ShardLayout::UnpackPooled);
}

void PooledExchange::PackGrads(const Tensor& grads, Tensor& send) {
  PushMove("PooledExchange::PackGrads", grads, send, LaunchPackGrads, &ShardLayout::PackGrads);
}

void PooledExchange::PushMove(const char* name, const Tensor& from, Tensor& to, GpuMove gpu,
                              CpuMove cpu) {
  if (ctx_.is_gpu()) {
    engine_.PushSync(
        [plan = View(layout_, plan_.data<int32_t>()), f = from.data<float>(), t = to.data<float>(),
         gpu](engine::RunContext rc) { gpu(plan, f, t, rc.stream); },
        {from.var(), plan_.var()}, {to.var()}, {.ctx = ctx_, .name = name});
    return;
  }
  engine_.PushSync([&l = layout_, f = Span<const float>(from), t = Span<float>(to),
                    cpu](engine::RunContext) { (l.*cpu)(f, t); },
                   {from.var()}, {to.var()}, {.name = name});
}

}  // namespace ember::train
