// NcclCommunicator (tools/train/dist/nccl_communicator.h) with world size
// 1 on one GPU: the all-to-all moves the bytes, the rank-order all-reduce
// keeps them, the barrier returns, bad counts break the group; with two
// GPUs (ranks as threads of this process): pieces of every size move
// exactly, the all-reduce gives a serial loop's bits, collectives pushed
// as engine ops wait for the GPU work that made their input on an Async
// engine, timings are recorded, and a peer that never comes is an error
// after the timeout, not a hang. Skips without NCCL or the GPUs. The
// unique id's hex form everywhere.

#include "tools/train/dist/nccl_communicator.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/base/device.h"
#include "engine/engine.h"
#include "engine/engine_options.h"
#include "engine/error.h"
#include "ops/elementwise.h"
#include "storage/tensor.h"
#include "tests/train/dist/dist_test_util.h"
#include "tools/train/dist/collective_ops.h"

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
  NcclCommunicatorOptions negative;
  negative.all_reduce_floats = -1;
  EXPECT_THAT(
      testing::ErrorOf([&] { NcclCommunicator(0, 1, 0, NcclUniqueId::Create(), negative); }),
      HasSubstr("all_reduce_floats -1"));
}

// Two ranks, a GPU each, as threads of this process.
class NcclTwoGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!NcclAvailable()) GTEST_SKIP() << "this build has no NCCL";
    if (GpuCount() < 2) GTEST_SKIP() << "needs two GPUs; this machine has " << GpuCount();
    id_ = NcclUniqueId::Create();
  }

  // body(rank, communicator, engine) on each rank's thread, its
  // communicator on GPU `rank`, its own engine of `type`.
  void RunRanks(const std::function<void(int, NcclCommunicator&, engine::Engine&)>& body,
                const NcclCommunicatorOptions& options = {},
                const char* type = "ThreadedEnginePerDeviceAsync") {
    testing::RunRankThreads(2, [&](int r) {
      NcclCommunicator comm(r, 2, r, id_, options);
      std::unique_ptr<engine::Engine> engine = engine::CreateEngine(engine::ParseEngineType(type));
      body(r, comm, *engine);
      engine->WaitForAll();
    });
  }

  static Tensor OnGpu(engine::Engine& engine, int gpu, const std::vector<float>& values) {
    Tensor host = Tensor::Empty(engine, {static_cast<int64_t>(values.size())}, DType::kF32,
                                engine::Context::CPU());
    host.WaitToWrite();
    std::copy(values.begin(), values.end(), host.data<float>());
    Tensor there = Tensor::Empty(engine, host.shape(), DType::kF32, engine::Context::GPU(gpu));
    host.CopyTo(there);
    there.WaitToRead();
    return there;
  }

  static std::vector<float> Read(const Tensor& gpu) {
    Tensor host = Tensor::Empty(gpu.engine(), gpu.shape(), DType::kF32, engine::Context::CPU());
    gpu.CopyTo(host);
    host.WaitToRead();
    return {host.data<float>(), host.data<float>() + host.numel()};
  }

  static std::span<float> Span(const Tensor& t) {
    return {t.data<float>(), static_cast<size_t>(t.numel())};
  }

  // Rank r's piece for rank p: `count` values that name both.
  static std::vector<float> Piece(int r, int p, int64_t count) {
    std::vector<float> v(count);
    for (int64_t i = 0; i < count; ++i) v[i] = static_cast<float>(r * 1000000 + p * 100000 + i);
    return v;
  }

  NcclUniqueId id_;
};

TEST_F(NcclTwoGpuTest, AllToAllVMovesPiecesOfEverySize) {
  // counts[r][p]: what rank r sends rank p; empty pieces too.
  const int64_t counts[2][2] = {{3, 0}, {70001, 5}};
  RunRanks([&](int r, NcclCommunicator& comm, engine::Engine& engine) {
    std::vector<float> send;
    std::vector<float> want;
    for (int p = 0; p < 2; ++p) {
      const std::vector<float> mine = Piece(r, p, counts[r][p]);
      send.insert(send.end(), mine.begin(), mine.end());
      const std::vector<float> theirs = Piece(p, r, counts[p][r]);
      want.insert(want.end(), theirs.begin(), theirs.end());
    }
    const Tensor s = OnGpu(engine, r, send);
    const Tensor v = OnGpu(engine, r, std::vector<float>(want.size(), -1.0f));
    const std::vector<int64_t> send_counts = {counts[r][0], counts[r][1]};
    const std::vector<int64_t> recv_counts = {counts[0][r], counts[1][r]};
    comm.AllToAllV<float>(Span(s), send_counts, Span(v), recv_counts, "pieces");
    EXPECT_EQ(Read(v), want) << "rank " << r;
  });
}

TEST_F(NcclTwoGpuTest, AllReduceSumGivesTheSerialLoopsBits) {
  // Values whose sum depends on the order in the last bits.
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> value(-1e4f, 1e4f);
  std::vector<std::vector<float>> data(2, std::vector<float>(4099));
  for (auto& rank : data) {
    for (float& x : rank) x = value(rng) * (rng() % 3 == 0 ? 1e-6f : 1.0f);
  }
  std::vector<float> want(data[0].size());
  for (size_t i = 0; i < want.size(); ++i) want[i] = data[0][i] + data[1][i];
  RunRanks([&](int r, NcclCommunicator& comm, engine::Engine& engine) {
    const Tensor t = OnGpu(engine, r, data[r]);
    comm.AllReduceSum(Span(t), "sum");
    EXPECT_EQ(Read(t), want) << "rank " << r;
    // The same values as a bucket of three parts (one of them empty).
    const Tensor u = OnGpu(engine, r, data[r]);
    const std::span<float> all = Span(u);
    const std::span<float> parts[] = {all.first(1000), all.subspan(1000, 0), all.subspan(1000)};
    comm.AllReduceSum(std::span<const std::span<float>>(parts), "bucket");
    EXPECT_EQ(Read(u), want) << "rank " << r;
  });
}

// The input comes from 200 ops queued on the producer's stream; without
// IssueAfter, NCCL's stream would send what the first of them left.
TEST_F(NcclTwoGpuTest, CollectiveOpsWaitForTheirInputsOnTheGpu) {
  constexpr int64_t kN = 1 << 20;
  constexpr int kAdds = 200;
  RunRanks([&](int r, NcclCommunicator& comm, engine::Engine& engine) {
    const engine::Context gpu = engine::Context::GPU(r);
    CollectiveOps ops(engine, comm, gpu);
    Tensor x = OnGpu(engine, r, std::vector<float>(kN, 0.0f));
    const Tensor one = OnGpu(engine, r, std::vector<float>(kN, 1.0f));
    Tensor recv = OnGpu(engine, r, std::vector<float>(kN, -1.0f));
    Tensor counts = Tensor::Empty(engine, {2}, DType::kI64, engine::Context::CPU());
    counts.WaitToWrite();
    counts.data<int64_t>()[0] = counts.data<int64_t>()[1] = kN / 2;
    ops::Fill(x, static_cast<float>(r * 1000));
    for (int k = 0; k < kAdds; ++k) ops::Add(x, one, x);
    ops.AllToAllV(x, counts, recv, counts, "after the adds");
    const std::vector<float> got = Read(recv);
    EXPECT_EQ(got.front(), static_cast<float>(kAdds)) << "rank " << r;
    EXPECT_EQ(got.back(), static_cast<float>(1000 + kAdds)) << "rank " << r;
  });
}

TEST_F(NcclTwoGpuTest, RecordsTimingsWhenAsked) {
  NcclCommunicatorOptions options;
  options.record_timings = true;
  RunRanks(
      [&](int r, NcclCommunicator& comm, engine::Engine& engine) {
        const Tensor s = OnGpu(engine, r, std::vector<float>(2048, 1.0f));
        const Tensor v = OnGpu(engine, r, std::vector<float>(2048, 0.0f));
        const std::vector<int64_t> counts = {1024, 1024};
        comm.AllToAllV<float>(Span(s), counts, Span(v), counts, "timed");
        comm.AllReduceSum(Span(v), "reduced");
        ASSERT_EQ(comm.timings().size(), 2u);
        EXPECT_EQ(comm.timings()[0].what, "timed");
        EXPECT_EQ(comm.timings()[0].bytes, 1024 * 4);  // to the other rank only
        EXPECT_GT(comm.timings()[0].seconds, 0.0);
        EXPECT_EQ(comm.timings()[1].bytes, 2048 * 4);
      },
      options);
}

// Rank 1 never calls; it leaves the group (aborting its end) only once
// rank 0 has given up.
TEST_F(NcclTwoGpuTest, APeerThatNeverComesIsAnErrorAfterTheTimeout) {
  NcclCommunicatorOptions options;
  options.timeout = std::chrono::milliseconds(1500);
  std::atomic<bool> gave_up = false;
  RunRanks(
      [&](int r, NcclCommunicator& comm, engine::Engine&) {
        if (r == 1) {
          while (!gave_up.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
          comm.Break("rank 1 leaves");
          return;
        }
        try {
          comm.Barrier("lonely barrier");
          ADD_FAILURE() << "no error";
        } catch (const Unavailable& e) {
          EXPECT_THAT(e.what(), HasSubstr("[NcclCommunicator::Barrier] rank 0: 'lonely barrier': "
                                          "not finished after 1500 ms"));
        }
        gave_up = true;
      },
      options);
}

}  // namespace
}  // namespace ember::train
