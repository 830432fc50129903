// CollectiveOps (tools/train/dist/collective_ops.h) on every engine type,
// ranks as threads each with its own engine: collectives run in push order
// whatever their inputs, counts may come from an earlier collective, the
// results equal a serial reference bit for bit, a failed collective is
// every rank's op error without a hang, and a rank whose input failed
// still meets its peers.

#include "tools/train/dist/collective_ops.h"

#include <bit>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <numeric>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/engine_options.h"
#include "engine/error.h"
#include "storage/tensor.h"
#include "tests/train/dist/dist_test_util.h"
#include "tools/train/dist/in_process_communicator.h"

namespace ember::train {
namespace {

using engine::Engine;
using storage::DType;
using storage::Tensor;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

struct EngineCase {
  const char* name;
  engine::EngineType type;
  int workers;
};

void PrintTo(const EngineCase& c, std::ostream* os) { *os << c.name; }

std::string Name(const ::testing::TestParamInfo<EngineCase>& info) {
  return std::string(info.param.name);
}

class CollectiveOpsTest : public ::testing::TestWithParam<EngineCase> {
 protected:
  [[nodiscard]] std::unique_ptr<Engine> MakeEngine() const {
    engine::EngineOptions options;
    options.type = GetParam().type;
    options.cpu_workers = GetParam().workers;
    options.pool_workers = GetParam().workers;
    return engine::CreateEngine(options);
  }

  // Runs body(rank, engine, ops) on a thread per rank, each with its own
  // engine; rethrows the first rank's failure (by rank) after all joined.
  void RunRanks(InProcessCommunicatorGroup& group,
                const std::function<void(int, Engine&, CollectiveOps&)>& body) const {
    testing::RunRankThreads(group.world_size(), [&](int r) {
      std::unique_ptr<Engine> engine = MakeEngine();
      {
        CollectiveOps ops(*engine, group.communicator(r));
        body(r, *engine, ops);
        engine->WaitForAll();
      }
      engine->WaitForAll();
    });
  }
};

Tensor HostTensor(Engine& engine, int64_t n, DType dtype) {
  Tensor t = Tensor::Empty(engine, {n}, dtype, engine::Context::CPU());
  t.WaitToWrite();
  std::memset(t.data(), 0, t.bytes());
  return t;
}

Tensor Counts(Engine& engine, const std::vector<int64_t>& counts) {
  Tensor t = HostTensor(engine, static_cast<int64_t>(counts.size()), DType::kI64);
  std::copy(counts.begin(), counts.end(), t.data<int64_t>());
  return t;
}

// What rank `from` sends rank `to` in the index exchange: a random count
// (zero included) of values that name both.
std::vector<int64_t> Piece(int from, int to, int round) {
  std::mt19937_64 rng(static_cast<uint64_t>(from * 131 + to * 7 + round));
  std::vector<int64_t> piece(rng() % 9);
  for (int64_t& v : piece) v = from * 1000000 + to * 1000 + static_cast<int64_t>(rng() % 1000);
  return piece;
}

// Rank r's pushes: a slow producer on rank 0 delays its first collective's
// input, so on an engine free to reorder, its second collective (ready at
// once) would run first and meet the peers' first: a mismatch.
TEST_P(CollectiveOpsTest, CollectivesRunInPushOrderWhateverTheirInputs) {
  static constexpr int kRanks = 2;
  InProcessCommunicatorGroup group(kRanks, {.timeout = std::chrono::milliseconds(5000)});
  std::vector<std::vector<float>> reduced(kRanks);
  std::vector<std::vector<int64_t>> received(kRanks);
  RunRanks(group, [&](int r, Engine& engine, CollectiveOps& ops) {
    Tensor send = HostTensor(engine, kRanks, DType::kI64);
    Tensor recv = HostTensor(engine, kRanks, DType::kI64);
    Tensor ones = Counts(engine, std::vector<int64_t>(kRanks, 1));
    Tensor grads = HostTensor(engine, 3, DType::kF32);
    for (int i = 0; i < 3; ++i) grads.data<float>()[i] = static_cast<float>(r + i);
    engine.PushSync(
        [&send, r](engine::RunContext) {
          if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
          for (int p = 0; p < kRanks; ++p) send.data<int64_t>()[p] = 10 * r + p;
        },
        {}, {send.var()}, {.name = "slow producer"});
    ops.AllToAllV(send, ones, recv, ones, "indices");
    ops.AllReduceSum(grads, "dense grads");
    recv.WaitToRead();
    grads.WaitToRead();
    received[r].assign(recv.data<int64_t>(), recv.data<int64_t>() + kRanks);
    reduced[r].assign(grads.data<float>(), grads.data<float>() + 3);
  });
  EXPECT_EQ(received[0], (std::vector<int64_t>{0, 10}));
  EXPECT_EQ(received[1], (std::vector<int64_t>{1, 11}));
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(reduced[r], (std::vector<float>{1, 3, 5}));
}

// A rank's barrier ends only once every rank has pushed its own: rank 1
// pushes 100 ms late, and rank 0 waits for it.
TEST_P(CollectiveOpsTest, ABarrierWaitsForTheLastRank) {
  static constexpr int kRanks = 3;
  InProcessCommunicatorGroup group(kRanks, {.timeout = std::chrono::milliseconds(5000)});
  std::vector<Clock::time_point> pushed(kRanks), passed(kRanks);
  RunRanks(group, [&](int r, Engine& engine, CollectiveOps& ops) {
    if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    pushed[r] = Clock::now();
    ops.Barrier("setup");
    engine.WaitForAll();
    passed[r] = Clock::now();
  });
  for (int r = 0; r < kRanks; ++r) EXPECT_GE(passed[r], pushed[1]) << "rank " << r;
}

// The lengths first, then the indices with the received lengths as counts:
// the second collective reads what the first wrote, when it runs.
TEST_P(CollectiveOpsTest, CountsFromAnEarlierCollectiveDriveTheNext) {
  static constexpr int kRanks = 3;
  constexpr int kRounds = 20;
  InProcessCommunicatorGroup group(kRanks);
  std::vector<std::vector<std::vector<int64_t>>> got(kRanks);
  RunRanks(group, [&](int r, Engine& engine, CollectiveOps& ops) {
    Tensor ones = Counts(engine, std::vector<int64_t>(kRanks, 1));
    for (int round = 0; round < kRounds; ++round) {
      std::vector<int64_t> send_values, lengths;
      for (int p = 0; p < kRanks; ++p) {
        const std::vector<int64_t> piece = Piece(r, p, round);
        send_values.insert(send_values.end(), piece.begin(), piece.end());
        lengths.push_back(static_cast<int64_t>(piece.size()));
      }
      Tensor send_lengths = Counts(engine, lengths);
      Tensor recv_lengths = HostTensor(engine, kRanks, DType::kI64);
      const auto sent = static_cast<int64_t>(send_values.size());
      Tensor send = HostTensor(engine, std::max<int64_t>(1, sent), DType::kI64);
      std::copy(send_values.begin(), send_values.end(), send.data<int64_t>());
      Tensor recv = HostTensor(engine, int64_t{9} * kRanks, DType::kI64);  // the most it can get
      ops.AllToAllV(send_lengths, ones, recv_lengths, ones, "lengths");
      ops.AllToAllV(send, send_lengths, recv, recv_lengths, "indices");
      recv_lengths.WaitToRead();
      recv.WaitToRead();
      const int64_t n = std::accumulate(recv_lengths.data<int64_t>(),
                                        recv_lengths.data<int64_t>() + kRanks, int64_t{0});
      got[r].emplace_back(recv.data<int64_t>(), recv.data<int64_t>() + n);
    }
  });
  for (int r = 0; r < kRanks; ++r) {
    for (int round = 0; round < kRounds; ++round) {
      std::vector<int64_t> expected;
      for (int p = 0; p < kRanks; ++p) {
        const std::vector<int64_t> piece = Piece(p, r, round);
        expected.insert(expected.end(), piece.begin(), piece.end());
      }
      EXPECT_EQ(got[r][round], expected) << "rank " << r << ", round " << round;
    }
  }
}

TEST_P(CollectiveOpsTest, AllReduceEqualsTheRankOrderSumBitForBit) {
  static constexpr int kRanks = 4;
  constexpr int kSize = 257;
  auto value = [](int r, int i) {
    std::mt19937 rng(static_cast<uint32_t>(r * 7919 + i));
    return std::uniform_real_distribution<float>(-1e4f, 1e4f)(rng) * (r == 1 ? 1e4f : 1.0f);
  };
  InProcessCommunicatorGroup group(kRanks);
  std::vector<std::vector<float>> out(kRanks);
  RunRanks(group, [&](int r, Engine& engine, CollectiveOps& ops) {
    Tensor data = HostTensor(engine, kSize, DType::kF32);
    for (int i = 0; i < kSize; ++i) data.data<float>()[i] = value(r, i);
    ops.AllReduceSum(data, "grads");
    data.WaitToRead();
    out[r].assign(data.data<float>(), data.data<float>() + kSize);
  });
  for (int i = 0; i < kSize; ++i) {
    float sum = value(0, i);
    for (int r = 1; r < kRanks; ++r) sum += value(r, i);
    for (int r = 0; r < kRanks; ++r) {
      ASSERT_EQ(std::bit_cast<uint32_t>(out[r][i]), std::bit_cast<uint32_t>(sum))
          << "rank " << r << ", " << i;
    }
  }
}

// Rank 1 expects 2 elements where rank 0 sends 1: both ranks' ops fail with
// the communicator's words, and the collective after fails at once.
TEST_P(CollectiveOpsTest, AFailedCollectiveIsEveryRanksOpErrorWithoutAHang) {
  static constexpr int kRanks = 2;
  InProcessCommunicatorGroup group(kRanks, {.timeout = std::chrono::milliseconds(20000)});
  std::vector<std::string> first(kRanks), second(kRanks);
  const auto start = Clock::now();
  RunRanks(group, [&](int r, Engine& engine, CollectiveOps& ops) {
    Tensor send = HostTensor(engine, 4, DType::kF32);
    Tensor recv = HostTensor(engine, 4, DType::kF32);
    Tensor send_counts = Counts(engine, {1, 1});
    Tensor recv_counts =
        Counts(engine, r == 1 ? std::vector<int64_t>{2, 1} : std::vector<int64_t>{1, 1});
    Tensor grads = HostTensor(engine, 2, DType::kF32);
    ops.AllToAllV(send, send_counts, recv, recv_counts, "pooled embeddings");
    ops.AllReduceSum(grads, "dense grads");
    try {
      engine.WaitForVar(recv.var());
    } catch (const Error& e) {
      first[r] = e.what();
    }
    try {
      engine.WaitForVar(grads.var());
    } catch (const Error& e) {
      second[r] = e.what();
    }
  });
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10)) << "a rank waited for its timeout";
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_THAT(first[r], HasSubstr("[Communicator::AllToAllV] rank " + std::to_string(r)));
    EXPECT_THAT(first[r], HasSubstr("'pooled embeddings'"));
    EXPECT_THAT(first[r], HasSubstr("rank 0 sends 4 bytes to rank 1, but rank 1 expects 8 bytes"));
    EXPECT_THAT(second[r], HasSubstr("'dense grads'")) << "the collective after ran as if alone";
  }
}

// Rank 0's input fails: its collective still runs (kNoSkip), but only to
// break the group, so rank 1 neither waits for it until the timeout nor
// sums what the failed op left in rank 0's buffer (it fails, naming rank
// 0); rank 0's output passes the input's error on.
TEST_P(CollectiveOpsTest, ARankWhoseInputFailedStillMeetsItsPeers) {
  static constexpr int kRanks = 2;
  InProcessCommunicatorGroup group(kRanks, {.timeout = std::chrono::milliseconds(20000)});
  std::vector<std::string> errors(kRanks);
  const auto start = Clock::now();
  RunRanks(group, [&](int r, Engine& engine, CollectiveOps& ops) {
    Tensor grads = HostTensor(engine, 2, DType::kF32);
    engine.PushSync(
        [r](engine::RunContext) {
          if (r == 0) throw InvalidArgument("the batch of rank 0 is bad");
        },
        {}, {grads.var()}, {.name = "backward"});
    ops.AllReduceSum(grads, "dense grads");
    try {
      engine.WaitForVar(grads.var());
    } catch (const Error& e) {
      errors[r] = e.what();
    }
  });
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10)) << "rank 1 waited for its timeout";
  EXPECT_THAT(errors[0], HasSubstr("the batch of rank 0 is bad"));
  // Worded as the group failed before or after rank 1 arrived.
  EXPECT_THAT(errors[1],
              ::testing::AllOf(
                  HasSubstr("[Communicator::AllReduceSum] rank 1: collective #0 'dense grads': "),
                  HasSubstr("rank 0 broke the group: the input of 'dense grads' failed on rank 0 "
                            "(its own wait reports why)")));
}

TEST_P(CollectiveOpsTest, BadTensorsAreRefusedAtPush) {
  InProcessCommunicatorGroup group(1);
  RunRanks(group, [&](int, Engine& engine, CollectiveOps& ops) {
    Tensor f = HostTensor(engine, 4, DType::kF32);
    Tensor i = HostTensor(engine, 4, DType::kI64);
    Tensor counts = Counts(engine, {4});
    Tensor short_counts = HostTensor(engine, 2, DType::kI64);
    EXPECT_THAT([&] { ops.AllToAllV(f, counts, i, counts, "rows"); },
                ::testing::ThrowsMessage<InvalidArgument>(
                    HasSubstr("[CollectiveOps] 'rows': send is f32 but recv is i64")));
    EXPECT_THAT([&] { ops.AllToAllV(f, short_counts, f, counts, "rows"); },
                ::testing::ThrowsMessage<InvalidArgument>(HasSubstr(
                    "`send_counts` must be i64 of 1 entries (one per rank), not i64 of 2")));
    EXPECT_THAT([&] { ops.AllReduceSum(i, "grads"); },
                ::testing::ThrowsMessage<InvalidArgument>(
                    HasSubstr("[CollectiveOps] 'grads': AllReduceSum takes f32, not i64")));
    Tensor none;
    EXPECT_THAT([&] { ops.AllReduceSum(none, "grads"); },
                ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("must be a host tensor")));
  });
}

INSTANTIATE_TEST_SUITE_P(
    Engines, CollectiveOpsTest,
    ::testing::Values(EngineCase{"Naive", engine::EngineType::kNaive, 1},
                      EngineCase{"Threaded2", engine::EngineType::kThreaded, 2},
                      EngineCase{"PerDevice1", engine::EngineType::kThreadedPerDevice, 1},
                      EngineCase{"PerDevice2", engine::EngineType::kThreadedPerDevice, 2}),
    Name);

}  // namespace
}  // namespace ember::train
