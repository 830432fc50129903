// The Communicator contract on InProcessCommunicatorGroup: the data
// against serial references (exact bytes, exact bits), then one test per
// misuse (each asserting the exception's type and message), the timeout,
// and the broken group after a failure.

#include "tools/train/dist/communicator.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <initializer_list>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/error.h"
#include "tools/train/dist/in_process_communicator.h"

namespace ember::train {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// Runs fn(rank's communicator) on every rank, each on its own thread, and
// returns what each threw (null where nothing).
std::vector<std::exception_ptr> RunRanks(InProcessCommunicatorGroup& group,
                                         const std::function<void(Communicator&)>& fn) {
  std::vector<std::exception_ptr> errors(group.world_size());
  std::vector<std::thread> threads;
  for (int r = 0; r < group.world_size(); ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(group.communicator(r));
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return errors;
}

// Expects `error` to be an E whose message has every one of `parts`.
template <typename E>
void ExpectError(const std::exception_ptr& error, std::initializer_list<std::string> parts) {
  ASSERT_TRUE(error) << "no exception thrown";
  try {
    std::rethrow_exception(error);
  } catch (const E& e) {
    for (const std::string& part : parts) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "'" << e.what() << "' lacks '" << part << "'";
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
}

template <typename E>
void ExpectThrowWith(const std::function<void()>& fn, std::initializer_list<std::string> parts) {
  std::exception_ptr error;
  try {
    fn();
  } catch (...) {
    error = std::current_exception();
  }
  ExpectError<E>(error, parts);
}

void ExpectNoErrors(const std::vector<std::exception_ptr>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) {
    if (!errors[r]) continue;
    try {
      std::rethrow_exception(errors[r]);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "rank " << r << ": " << e.what();
    }
  }
}

// One AllToAllV over G ranks: counts[s][d] bytes from s to d, and every
// rank's send buffer, random.
struct Exchange {
  std::vector<std::vector<int64_t>> counts;
  std::vector<std::vector<std::byte>> send;

  Exchange(int world_size, std::mt19937& rng) : counts(world_size), send(world_size) {
    std::uniform_int_distribution<int64_t> count(0, 40);
    std::uniform_int_distribution<int> byte(0, 255);
    for (int s = 0; s < world_size; ++s) {
      for (int d = 0; d < world_size; ++d)
        counts[s].push_back(count(rng) % 5 == 0 ? 0 : count(rng));
      for (int64_t c : counts[s]) {
        for (int64_t i = 0; i < c; ++i) send[s].push_back(std::byte(byte(rng)));
      }
    }
  }
  // What rank d expects from each rank.
  [[nodiscard]] std::vector<int64_t> RecvCounts(int d) const {
    std::vector<int64_t> recv;
    for (const std::vector<int64_t>& row : counts) recv.push_back(row[d]);
    return recv;
  }
  // Rank d's receive buffer, serially: the pieces for d, in rank order.
  [[nodiscard]] std::vector<std::byte> Expected(int d) const {
    std::vector<std::byte> out;
    for (size_t s = 0; s < counts.size(); ++s) {
      int64_t offset = 0;
      for (int q = 0; q < d; ++q) offset += counts[s][q];
      out.insert(out.end(), send[s].begin() + offset, send[s].begin() + offset + counts[s][d]);
    }
    return out;
  }
  // Rank r's part of the exchange, into `recv`.
  void Run(Communicator& comm, std::vector<std::byte>& recv, std::string_view what) const {
    const std::vector<int64_t> recv_counts = RecvCounts(comm.rank());
    recv.assign(Expected(comm.rank()).size(), std::byte{0});
    comm.AllToAllV(std::span<const std::byte>(send[comm.rank()]), counts[comm.rank()],
                   std::span<std::byte>(recv), recv_counts, what);
  }
};

// Every rank's input: values of mixed magnitudes, so the order of the sum
// shows in the bits.
std::vector<std::vector<float>> ReduceInputs(int world_size, size_t size, std::mt19937& rng) {
  const float kValues[] = {1e8f, 1.0f, -1e8f, 3.3e-3f, -7.25f, 1e-8f, 65537.0f, 0.1f};
  std::uniform_int_distribution<int> pick(0, 7);
  std::uniform_real_distribution<float> noise(-1.0f, 1.0f);
  std::vector<std::vector<float>> inputs(world_size);
  for (std::vector<float>& input : inputs) {
    for (size_t i = 0; i < size; ++i) input.push_back(kValues[pick(rng)] * (1.0f + noise(rng)));
  }
  return inputs;
}

// The serial reference: a loop over the ranks in order.
std::vector<float> RankOrderSum(const std::vector<std::vector<float>>& inputs) {
  std::vector<float> sum = inputs[0];
  for (size_t p = 1; p < inputs.size(); ++p) {
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += inputs[p][i];
  }
  return sum;
}

void ExpectSameBits(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
        << "element " << i << ": " << got[i] << " vs " << want[i];
  }
}

InProcessCommunicatorOptions Timeout(milliseconds timeout) { return {.timeout = timeout}; }

// --- Data ---

TEST(CommunicatorTest, KnowsItsRankAndWorldSize) {
  InProcessCommunicatorGroup group(3);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(group.communicator(r).rank(), r);
    EXPECT_EQ(group.communicator(r).world_size(), 3);
  }
}

TEST(CommunicatorTest, AllToAllVMatchesSerialReference) {
  for (int world_size = 1; world_size <= 4; ++world_size) {
    SCOPED_TRACE(world_size);
    InProcessCommunicatorGroup group(world_size);
    std::mt19937 rng(world_size);
    for (int round = 0; round < 5; ++round) {
      const Exchange exchange(world_size, rng);
      std::vector<std::vector<std::byte>> recv(world_size);
      ExpectNoErrors(RunRanks(
          group, [&](Communicator& comm) { exchange.Run(comm, recv[comm.rank()], "round"); }));
      for (int d = 0; d < world_size; ++d) EXPECT_EQ(recv[d], exchange.Expected(d)) << "rank " << d;
    }
  }
}

TEST(CommunicatorTest, TypedAllToAllVCountsElements) {
  InProcessCommunicatorGroup group(3);
  // Rank s sends d + 1 values s * 100 + d * 10 + i to rank d.
  std::vector<std::vector<int64_t>> recv(3);
  ExpectNoErrors(RunRanks(group, [&](Communicator& comm) {
    const int64_t s = comm.rank();
    std::vector<int64_t> send;
    for (int64_t d = 0; d < 3; ++d) {
      for (int64_t i = 0; i <= d; ++i) send.push_back(s * 100 + d * 10 + i);
    }
    const std::vector<int64_t> send_counts = {1, 2, 3};
    const std::vector<int64_t> recv_counts(3, s + 1);
    recv[s].resize(3 * (s + 1));
    comm.AllToAllV<int64_t>(send, send_counts, recv[s], recv_counts, "typed");
  }));
  EXPECT_EQ(recv[0], (std::vector<int64_t>{0, 100, 200}));
  EXPECT_EQ(recv[2], (std::vector<int64_t>{20, 21, 22, 120, 121, 122, 220, 221, 222}));
}

TEST(CommunicatorTest, AllToAllSendsEqualPieces) {
  InProcessCommunicatorGroup group(4);
  std::vector<std::vector<int32_t>> recv(4, std::vector<int32_t>(8));
  ExpectNoErrors(RunRanks(group, [&](Communicator& comm) {
    std::vector<int32_t> send;
    for (int32_t i = 0; i < 8; ++i) send.push_back(comm.rank() * 8 + i);
    comm.AllToAll<int32_t>(send, recv[comm.rank()], "equal");
  }));
  EXPECT_EQ(recv[1], (std::vector<int32_t>{2, 3, 10, 11, 18, 19, 26, 27}));
}

TEST(CommunicatorTest, AllReduceSumIsTheRankOrderSumOnEveryRank) {
  for (int world_size = 1; world_size <= 4; ++world_size) {
    SCOPED_TRACE(world_size);
    InProcessCommunicatorGroup group(world_size);
    std::mt19937 rng(100 + world_size);
    const std::vector<std::vector<float>> inputs = ReduceInputs(world_size, 1000, rng);
    std::vector<std::vector<float>> data = inputs;
    ExpectNoErrors(RunRanks(
        group, [&](Communicator& comm) { comm.AllReduceSum(data[comm.rank()], "grads"); }));
    for (int r = 0; r < world_size; ++r) ExpectSameBits(data[r], RankOrderSum(inputs));
  }
}

TEST(CommunicatorTest, AllReduceSumAddsInRankOrder) {
  // (1e8 + 1) - 1e8 == 0 in float; any other order gives 1.
  InProcessCommunicatorGroup group(3);
  std::vector<std::vector<float>> data = {{1e8f, 1.0f}, {1.0f, -1e8f}, {-1e8f, 1e8f}};
  ExpectNoErrors(
      RunRanks(group, [&](Communicator& comm) { comm.AllReduceSum(data[comm.rank()], "order"); }));
  for (const std::vector<float>& d : data) ExpectSameBits(d, {0.0f, 0.0f});
  // The control: the order shows. (1 - 1e8) + 1e8 is 0 too.
  volatile float big = 1e8f;
  EXPECT_EQ((big + -big) + 1.0f, 1.0f);
}

TEST(CommunicatorTest, HundredsOfCollectivesInARowStayConsistent) {
  constexpr int kWorld = 4;
  constexpr int kRounds = 300;
  InProcessCommunicatorGroup group(kWorld);
  std::mt19937 rng(7);
  std::vector<Exchange> exchanges;
  std::vector<std::vector<std::vector<float>>> inputs;
  for (int i = 0; i < kRounds; ++i) {
    exchanges.emplace_back(kWorld, rng);
    inputs.push_back(ReduceInputs(kWorld, 1 + i % 17, rng));
  }
  std::vector<int> bad_rounds(kWorld, 0);
  ExpectNoErrors(RunRanks(group, [&](Communicator& comm) {
    const int r = comm.rank();
    std::vector<std::byte> recv;  // reused: a returned call no longer reads it
    for (int i = 0; i < kRounds; ++i) {
      const std::string what = "step " + std::to_string(i);
      exchanges[i].Run(comm, recv, what);
      std::vector<float> data = inputs[i][r];
      comm.AllReduceSum(data, what);
      if (i % 10 == 0) comm.Barrier(what);
      const std::vector<float> want = RankOrderSum(inputs[i]);
      const bool same =
          std::equal(data.begin(), data.end(), want.begin(), want.end(), [](float a, float b) {
            return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
          });
      if (recv != exchanges[i].Expected(r) || !same) ++bad_rounds[r];
    }
  }));
  EXPECT_EQ(bad_rounds, std::vector<int>(kWorld, 0));
}

// --- Misuse: every rank of the collective gets the error ---

TEST(CommunicatorTest, MismatchedCountsNameBothRanksAndCounts) {
  InProcessCommunicatorGroup group(2);
  const auto errors = RunRanks(group, [&](Communicator& comm) {
    // Rank 0 sends 4 bytes to rank 1; rank 1 expects 8 from rank 0.
    std::vector<std::byte> send(6), recv(comm.rank() == 0 ? 2 + 2 : 8 + 2);
    const std::vector<int64_t> send_bytes = {2, 4};
    const std::vector<int64_t> recv_bytes =
        comm.rank() == 0 ? std::vector<int64_t>{2, 2} : std::vector<int64_t>{8, 2};
    comm.AllToAllV(std::span<const std::byte>(send), send_bytes, std::span<std::byte>(recv),
                   recv_bytes, "indices of batch 7");
  });
  for (int r = 0; r < 2; ++r) {
    ExpectError<InvalidArgument>(
        errors[r], {"[Communicator::AllToAllV] rank " + std::to_string(r) +
                    ": collective #0 'indices of batch 7': rank 0 sends 4 bytes to rank 1, "
                    "but rank 1 expects 8 bytes"});
  }
}

TEST(CommunicatorTest, MismatchedKindNamesTheRankAndBothCollectives) {
  InProcessCommunicatorGroup group(3);
  const auto errors = RunRanks(group, [&](Communicator& comm) {
    std::vector<float> data(4, 1.0f);
    if (comm.rank() == 1) return comm.Barrier("step 3");
    comm.AllReduceSum(data, "step 3");
  });
  for (int r = 0; r < 3; ++r) {
    ExpectError<InvalidArgument>(
        errors[r], {"rank " + std::to_string(r) + ":",
                    "rank 1 called Barrier('step 3') but rank 0 called AllReduceSum('step 3')"});
  }
  ExpectError<InvalidArgument>(errors[1], {"[Communicator::Barrier] rank 1:"});
}

TEST(CommunicatorTest, MismatchedWhatIsAnError) {
  InProcessCommunicatorGroup group(2);
  const auto errors = RunRanks(group, [&](Communicator& comm) {
    comm.Barrier(comm.rank() == 0 ? "end of epoch 1" : "end of epoch 2");
  });
  for (int r = 0; r < 2; ++r) {
    ExpectError<InvalidArgument>(errors[r],
                                 {"[Communicator::Barrier] rank " + std::to_string(r) + ":",
                                  "rank 1 called Barrier('end of epoch 2') but rank 0 called "
                                  "Barrier('end of epoch 1')"});
  }
}

TEST(CommunicatorTest, MismatchedAllReduceSizesAreAnError) {
  InProcessCommunicatorGroup group(2);
  const auto errors = RunRanks(group, [&](Communicator& comm) {
    std::vector<float> data(comm.rank() == 0 ? 10 : 12);
    comm.AllReduceSum(data, "grads");
  });
  for (int r = 0; r < 2; ++r) {
    ExpectError<InvalidArgument>(
        errors[r], {"[Communicator::AllReduceSum] rank", "rank 1 has 12 floats but rank 0 has 10"});
  }
}

// A rank's own bad arguments: rejected before any exchange, naming the rank.
struct BadCall {
  std::string name;
  std::function<void(Communicator&)> call;
  std::string message;
};

std::vector<BadCall> BadCalls() {
  static std::vector<std::byte> send(8), recv(8);
  static std::vector<int32_t> ints(6);
  const auto v = [](std::vector<int64_t> counts, std::string_view what) {
    return [counts, what](Communicator& comm) {
      comm.AllToAllV(std::span<const std::byte>(send), counts, std::span<std::byte>(recv),
                     std::vector<int64_t>{4, 4}, what);
    };
  };
  return {
      {"ShortCounts", v({8}, "a"),
       "[Communicator::AllToAllV] rank 1: 'a': send counts has 1 "
       "entries, not world_size 2"},
      {"NegativeCount", v({4, -2}, "b"), "rank 1: 'b': send counts[1] is -2"},
      {"SumTooLarge", v({4, 5}, "c"), "send counts sum to more than the buffer's 8 bytes"},
      {"SumTooSmall", v({4, 3}, "d"), "send counts sum to 7 but the buffer has 8 bytes"},
      {"NotAMultiple",
       [](Communicator& comm) {
         std::vector<int32_t> out(5);
         comm.AllToAll<int32_t>(std::span<const int32_t>(ints).first(5), out, "e");
       },
       "[Communicator::AllToAll] rank 1: 'e': send has 5 elements of 4 bytes, not a multiple of "
       "world_size 2"},
      {"RecvSize",
       [](Communicator& comm) {
         std::vector<int32_t> out(4);
         comm.AllToAll<int32_t>(ints, out, "f");
       },
       "'f': recv has 4 elements of 4 bytes but send has 6"},
  };
}

class BadArgumentsTest : public ::testing::TestWithParam<BadCall> {};

TEST_P(BadArgumentsTest, RejectsAndBreaksTheGroup) {
  const BadCall& bad = GetParam();
  InProcessCommunicatorGroup group(2);  // the default timeout, 60 s: a hang would fail
  ExpectThrowWith<InvalidArgument>([&] { bad.call(group.communicator(1)); }, {bad.message});
  // Rank 0 does not wait for rank 1 in vain.
  ExpectThrowWith<InvalidArgument>([&] { group.communicator(0).Barrier("next"); },
                                   {"[Communicator::Barrier] rank 0: collective #0 'next': "
                                    "the group failed at collective #0: rank 1 broke the "
                                    "group: ",
                                    bad.message});
}

INSTANTIATE_TEST_SUITE_P(Cases, BadArgumentsTest, ::testing::ValuesIn(BadCalls()),
                         [](const ::testing::TestParamInfo<BadCall>& info) {
                           return info.param.name;
                         });

TEST(CommunicatorTest, BadArgumentsWakeAWaitingPeer) {
  InProcessCommunicatorGroup group(2);  // the default timeout, 60 s
  const auto errors = RunRanks(group, [](Communicator& comm) {
    std::vector<std::byte> send(4), recv(4);
    const std::vector<int64_t> counts = {2, comm.rank() == 0 ? int64_t{2} : int64_t{3}};
    comm.AllToAllV(std::span<const std::byte>(send), counts, std::span<std::byte>(recv),
                   std::vector<int64_t>{2, 2}, "late");
  });
  ExpectError<InvalidArgument>(errors[1], {"rank 1: 'late': send counts sum to more"});
  ExpectError<InvalidArgument>(errors[0], {"[Communicator::AllToAllV] rank 0: collective #0 "
                                           "'late':",
                                           "rank 1 broke the group"});
}

TEST(CommunicatorTest, GroupRejectsBadOptions) {
  ExpectThrowWith<InvalidArgument>([] { InProcessCommunicatorGroup group(0); },
                                   {"[InProcessCommunicatorGroup] world_size is 0"});
  ExpectThrowWith<InvalidArgument>(
      [] { InProcessCommunicatorGroup group(2, Timeout(milliseconds(0))); },
      {"[InProcessCommunicatorGroup] timeout is 0 ms"});
  InProcessCommunicatorGroup group(2);
  ExpectThrowWith<InvalidArgument>([&] { (void)group.communicator(2); },
                                   {"rank 2 of world_size 2"});
}

// --- Timeouts and the broken group ---

TEST(CommunicatorTest, AnAbsentRankTimesOutTheOthers) {
  InProcessCommunicatorGroup group(4, Timeout(milliseconds(200)));
  const Clock::time_point start = Clock::now();
  std::vector<std::exception_ptr> errors(4);
  std::vector<std::thread> threads;
  for (int r : {0, 1}) {  // ranks 2 and 3 never come
    threads.emplace_back([&, r] {
      try {
        group.communicator(r).Barrier("end of step 5");
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const auto elapsed = Clock::now() - start;
  EXPECT_GE(elapsed, milliseconds(200));
  EXPECT_LT(elapsed, milliseconds(1500));
  for (int r : {0, 1}) {
    ExpectError<Unavailable>(errors[r], {"[Communicator::Barrier] rank " + std::to_string(r) +
                                             ": collective #0 'end of step 5':",
                                         "waited 200 ms", "ranks 2, 3 never arrived"});
  }
  // The late rank learns why at once.
  ExpectThrowWith<Unavailable>(
      [&] { group.communicator(3).Barrier("end of step 5"); },
      {"rank 3: collective #0 'end of step 5': the group failed at collective #0 "
       "Barrier('end of step 5'): rank ",
       "ranks 2, 3 never arrived"});
}

TEST(CommunicatorTest, AfterAFailureEveryCallThrowsAtOnce) {
  InProcessCommunicatorGroup group(3);  // the default timeout, 60 s: a wait would show
  RunRanks(group, [](Communicator& comm) { comm.Barrier(comm.rank() == 2 ? "x" : "y"); });
  const Clock::time_point start = Clock::now();
  const auto errors = RunRanks(group, [](Communicator& comm) {
    for (int i = 0; i < 3; ++i) {
      std::vector<float> data(3);
      try {
        comm.AllReduceSum(data, "grads");
      } catch (const InvalidArgument&) {
        if (i == 2) throw;
      }
    }
  });
  EXPECT_LT(Clock::now() - start, milliseconds(1000));
  for (int r = 0; r < 3; ++r) {
    ExpectError<InvalidArgument>(
        errors[r], {"[Communicator::AllReduceSum] rank " + std::to_string(r) +
                    ": collective #3 'grads': the group failed at collective #0: rank 2 "
                    "called Barrier('x') but rank 0 called Barrier('y')"});
  }
}

}  // namespace
}  // namespace ember::train
