// PooledExchange (tools/train/dist/pooled_exchange.h) and the column plan
// behind it (ShardLayout::Columns): on fresh random data and layouts of 1
// to 4 ranks, table-wise and row-wise tables of several dims, the plan
// applied element by element gives ShardLayout::UnpackPooled's and
// PackGrads's bits (CPU, everywhere), and so do the GPU kernels (skipped
// without a GPU).

#include "tools/train/dist/pooled_exchange.h"

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/base/device.h"
#include "engine/engine.h"
#include "engine/engine_options.h"
#include "storage/tensor.h"
#include "tools/train/dist/shard_layout.h"

namespace ember::train {
namespace {

using storage::DType;
using storage::Tensor;

struct Case {
  std::string plan;  // ParseShardPlan's form
  int ranks;
  std::vector<int64_t> rows, dims;
  int64_t local_batch;
};

std::vector<Case> Cases() {
  return {
      {"0:0,1:0", 1, {10, 20}, {4, 8}, 5},
      {"0:1,1:0,2:1", 2, {10, 20, 30}, {4, 8, 4}, 7},
      {"0:row,1:0,2:1,3:row", 2, {10, 20, 30, 9}, {8, 4, 12, 4}, 3},
      {"0:2,1:row,2:0,3:3,4:1", 4, {10, 20, 30, 9, 16}, {4, 8, 4, 16, 4}, 6},
      {"0:row,1:row", 3, {7, 12}, {4, 12}, 4},
      // Odd widths, and longer batches.
      {"0:1,1:row,2:0", 2, {10, 20, 30}, {3, 5, 7}, 70},
      {"0:row,1:2,2:0", 3, {40, 20, 30}, {6, 1, 9}, 33},
  };
}

ShardLayout LayoutOf(const Case& c) {
  return ShardLayout(ParseShardPlan(c.plan, static_cast<int>(c.rows.size()), c.ranks),
                     ops::TbeTables(c.rows, c.dims), c.local_batch);
}

int64_t ExchangedColumns(const ShardLayout& l) {
  int64_t w = 0;
  for (int p = 0; p < l.ranks(); ++p) w += l.owned_dim(p);
  return w;
}

std::vector<float> Random(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> value(-2.0f, 2.0f);
  std::vector<float> out(n);
  for (float& v : out) v = value(rng);
  return out;
}

// The plan applied as the kernels apply it, element by element.
void UnpackByPlan(const ShardLayout& l, const ShardLayout::ColumnPlan& plan,
                  std::span<const float> received, std::span<float> out) {
  auto at = [&](int64_t b, int32_t w) {
    const int32_t p = plan.owner[w];
    const int32_t first = plan.first_column[p];
    return received[l.local_batch() * first + b * (plan.first_column[p + 1] - first) + w - first];
  };
  for (int64_t b = 0; b < l.local_batch(); ++b) {
    for (int64_t c = 0; c < l.total_dim(); ++c) {
      float sum = at(b, plan.sources[plan.sources_begin[c]]);
      for (int32_t k = plan.sources_begin[c] + 1; k < plan.sources_begin[c + 1]; ++k) {
        sum += at(b, plan.sources[k]);
      }
      out[b * l.total_dim() + c] = sum;
    }
  }
}

void PackByPlan(const ShardLayout& l, const ShardLayout::ColumnPlan& plan,
                std::span<const float> grads, std::span<float> send) {
  for (int p = 0; p < l.ranks(); ++p) {
    const int32_t first = plan.first_column[p];
    const int32_t width = plan.first_column[p + 1] - first;
    for (int64_t b = 0; b < l.local_batch(); ++b) {
      for (int32_t c = 0; c < width; ++c) {
        send[l.local_batch() * first + b * width + c] =
            grads[b * l.total_dim() + plan.out_column[first + c]];
      }
    }
  }
}

TEST(PooledExchangeTest, TheColumnPlanMovesWhatTheLayoutMoves) {
  uint64_t seed = 1;
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.plan);
    const ShardLayout l = LayoutOf(c);
    const ShardLayout::ColumnPlan plan = l.Columns();
    ASSERT_EQ(plan.first_column.back(), ExchangedColumns(l));
    const std::vector<float> received = Random(c.local_batch * ExchangedColumns(l), seed++);
    std::vector<float> want(c.local_batch * l.total_dim()), got(want.size(), -7.0f);
    l.UnpackPooled(received, want);
    UnpackByPlan(l, plan, received, got);
    EXPECT_EQ(got, want);
    const std::vector<float> grads = Random(c.local_batch * l.total_dim(), seed++);
    std::vector<float> sent(received.size()), packed(received.size(), -7.0f);
    l.PackGrads(grads, sent);
    PackByPlan(l, plan, grads, packed);
    EXPECT_EQ(packed, sent);
  }
}

class PooledExchangeGpuTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GpuCount() == 0) GTEST_SKIP() << "no CUDA device";
    engine_ = engine::CreateEngine(engine::ParseEngineType(GetParam()));
  }

  Tensor OnGpu(const std::vector<float>& values) {
    Tensor host = Tensor::Empty(*engine_, {static_cast<int64_t>(values.size())}, DType::kF32,
                                engine::Context::CPU());
    host.WaitToWrite();
    std::ranges::copy(values, host.data<float>());
    Tensor gpu = Tensor::Empty(*engine_, host.shape(), DType::kF32, kGpu);
    host.CopyTo(gpu);
    return gpu;
  }

  std::vector<float> Read(const Tensor& gpu) {
    Tensor host = Tensor::Empty(*engine_, gpu.shape(), DType::kF32, engine::Context::CPU());
    gpu.CopyTo(host);
    host.WaitToRead();
    return {host.data<float>(), host.data<float>() + host.numel()};
  }

  static constexpr engine::Context kGpu = engine::Context::GPU(0);
  std::unique_ptr<engine::Engine> engine_;
};

TEST_P(PooledExchangeGpuTest, KernelsGiveTheCpuBits) {
  uint64_t seed = 100;
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.plan);
    const ShardLayout l = LayoutOf(c);
    PooledExchange exchange(*engine_, l, kGpu);
    const std::vector<float> received = Random(c.local_batch * ExchangedColumns(l), seed++);
    std::vector<float> want(c.local_batch * l.total_dim());
    l.UnpackPooled(received, want);
    // Poisoned outputs: every element must be written.
    Tensor out = OnGpu(std::vector<float>(want.size(), 1e30f));
    exchange.Unpack(OnGpu(received), out);
    EXPECT_EQ(Read(out), want);
    const std::vector<float> grads = Random(c.local_batch * l.total_dim(), seed++);
    std::vector<float> sent(received.size());
    l.PackGrads(grads, sent);
    Tensor send = OnGpu(std::vector<float>(sent.size(), 1e30f));
    exchange.PackGrads(OnGpu(grads), send);
    EXPECT_EQ(Read(send), sent);
  }
}

INSTANTIATE_TEST_SUITE_P(Engines, PooledExchangeGpuTest,
                         ::testing::Values("ThreadedEnginePerDevice",
                                           "ThreadedEnginePerDeviceAsync"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ember::train
