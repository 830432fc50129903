// NcclCommunicator (tools/train/dist/nccl_communicator.h) with world size
// 1 on one GPU: the all-to-all moves the bytes, the rank-order all-reduce
// keeps them, the barrier returns, bad counts break the group. Skips
// without NCCL or a GPU. The unique id's hex form everywhere.

#include "tools/train/dist/nccl_communicator.h"

#include <cstdint>
#include <span>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/base/device.h"
#include "engine/engine.h"
#include "engine/engine_options.h"
#include "engine/error.h"
#include "storage/tensor.h"

namespace ember::train {
namespace {

using storage::DType;
using storage::Tensor;
using ::testing::HasSubstr;

TEST(NcclUniqueIdTest, HexRoundTrips) {
  NcclUniqueId id;
  for (size_t i = 0; i < id.bytes.size(); ++i) id.bytes[i] = static_cast<std::byte>(i * 7 + 3);
  const std::string hex = id.ToHex();
  EXPECT_EQ(hex.size(), 256u);
  EXPECT_EQ(hex.substr(0, 6), "030a11");
  EXPECT_EQ(NcclUniqueId::FromHex(hex).bytes, id.bytes);
  try {
    (void)NcclUniqueId::FromHex("03zz");
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(),
                 "[NcclUniqueId::FromHex] expected 256 lowercase hex digits; got 4 characters "
                 "starting '03zz'");
  }
}

class NcclCommunicatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!NcclAvailable()) GTEST_SKIP() << "this build has no NCCL";
    if (GpuCount() == 0) GTEST_SKIP() << "no CUDA device";
    engine::EngineOptions options;
    options.type = engine::EngineType::kNaive;
    engine_ = engine::CreateEngine(options);
  }

  Tensor Gpu(const std::vector<float>& values) {
    Tensor host = Tensor::Empty(*engine_, {static_cast<int64_t>(values.size())}, DType::kF32,
                                engine::Context::CPU());
    host.WaitToWrite();
    std::copy(values.begin(), values.end(), host.data<float>());
    Tensor gpu = Tensor::Empty(*engine_, host.shape(), DType::kF32, engine::Context::GPU(0));
    host.CopyTo(gpu);
    gpu.WaitToRead();
    return gpu;
  }

  std::vector<float> Host(const Tensor& gpu) {
    Tensor host = Tensor::Empty(*engine_, gpu.shape(), DType::kF32, engine::Context::CPU());
    gpu.CopyTo(host);
    host.WaitToRead();
    return {host.data<float>(), host.data<float>() + host.numel()};
  }

  static std::span<float> Span(Tensor& t) {
    return {t.data<float>(), static_cast<size_t>(t.numel())};
  }

  std::unique_ptr<engine::Engine> engine_;
};

TEST_F(NcclCommunicatorTest, WorldSizeOneMovesAndKeepsTheBits) {
  NcclCommunicator comm(0, 1, 0, NcclUniqueId::Create());
  EXPECT_EQ(comm.world_size(), 1);
  const std::vector<float> values = {1.5f, -2.25f, 3.0f, 1e-30f, 7.0f};
  Tensor send = Gpu(values);
  Tensor recv = Gpu(std::vector<float>(values.size(), 0.0f));
  const std::vector<int64_t> counts = {static_cast<int64_t>(values.size())};
  comm.AllToAllV<float>(Span(send), counts, Span(recv), counts, "self copy");
  EXPECT_EQ(Host(recv), values);
  comm.AllReduceSum(Span(send), "identity");
  EXPECT_EQ(Host(send), values);
  comm.Barrier("barrier");
  // Nothing to send is fine too.
  const std::vector<int64_t> none = {0};
  comm.AllToAllV<float>(Span(send).first(0), none, Span(recv).first(0), none, "empty");
}

TEST_F(NcclCommunicatorTest, BadCountsBreakTheGroup) {
  NcclCommunicator comm(0, 1, 0, NcclUniqueId::Create());
  Tensor send = Gpu({1.0f, 2.0f});
  Tensor recv = Gpu({0.0f, 0.0f});
  const std::vector<int64_t> three = {3};
  const std::vector<int64_t> two = {2};
  EXPECT_THROW(comm.AllToAllV<float>(Span(send), three, Span(recv), two, "indices of batch 7"),
               InvalidArgument);
  try {
    comm.Barrier("after");
    FAIL() << "no error";
  } catch (const Unavailable& e) {
    EXPECT_THAT(e.what(), HasSubstr("[NcclCommunicator::Barrier] rank 0: 'after': the group is "
                                    "broken: [Communicator::AllToAllV] rank 0: 'indices of "
                                    "batch 7'"));
  }
}

TEST_F(NcclCommunicatorTest, RejectsABadRankOrDevice) {
  EXPECT_THROW(NcclCommunicator(1, 1, 0, NcclUniqueId::Create()), InvalidArgument);
  EXPECT_THROW(NcclCommunicator(0, 1, GpuCount(), NcclUniqueId::Create()), InvalidArgument);
}

}  // namespace
}  // namespace ember::train
