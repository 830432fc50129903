// The hand-written peers of the GPU cases (see gpu_hand_peers.h).

#include "tools/bench/engine/gpu_hand_peers.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "absl/strings/str_format.h"
#include "engine/error.h"
#include "tools/bench/common/spin_kernel.h"

namespace ember::bench {

Counters::Counters(int size) : size_(size) {
  CheckCuda(cudaMalloc(reinterpret_cast<void**>(&data_), size * sizeof(int)), "cudaMalloc");
}

Counters::~Counters() { cudaFree(data_); }

void Counters::Zero() {
  CheckCuda(cudaMemset(data_, 0, size_ * sizeof(int)), "cudaMemset");
  CheckCuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize (zero counters)");
}

bool Counters::Match(const std::string& who, const std::vector<int>& expected) const {
  std::vector<int> actual(expected.size());
  CheckCuda(cudaMemcpy(actual.data(), data_, actual.size() * sizeof(int), cudaMemcpyDeviceToHost),
            "cudaMemcpy (counters)");
  for (size_t i = 0; i < expected.size(); ++i) {
    if (actual[i] == expected[i]) continue;
    absl::FPrintF(stderr, "[ember-bench-engine] ERROR: %s: counter %d is %d, expected %d\n", who, i,
                  actual[i], expected[i]);
    return false;
  }
  return true;
}

namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The streams and events of one hand-written run; non-blocking streams and
// events without timing, as the engines make them.
class HandStreams {
 public:
  HandStreams(int streams, int events) : streams_(streams), events_(events) {
    for (cudaStream_t& stream : streams_) {
      CheckCuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    }
    for (cudaEvent_t& event : events_) {
      CheckCuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
    }
  }
  ~HandStreams() {
    cudaDeviceSynchronize();
    for (cudaStream_t stream : streams_) cudaStreamDestroy(stream);
    for (cudaEvent_t event : events_) cudaEventDestroy(event);
  }
  HandStreams(const HandStreams&) = delete;
  HandStreams& operator=(const HandStreams&) = delete;

  [[nodiscard]] cudaStream_t stream(int i) const { return streams_[i]; }
  [[nodiscard]] cudaEvent_t event(int i) const { return events_[i]; }

  // `waiter` waits on the GPU for what event(i) last captured.
  void Wait(int waiter, int i) const {
    CheckCuda(cudaStreamWaitEvent(streams_[waiter], events_[i], 0), "cudaStreamWaitEvent");
  }
  void Record(int i, int on) const {
    CheckCuda(cudaEventRecord(events_[i], streams_[on]), "cudaEventRecord");
  }
  // Waits for the GPU, then reports a failed launch.
  static void Finish() {
    CheckCuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    CheckCuda(cudaGetLastError(), "kernel launch");
  }

 private:
  std::vector<cudaStream_t> streams_;
  std::vector<cudaEvent_t> events_;
};

}  // namespace

double HandChain(int ops, int spin_us, int streams, int* counter) {
  const HandStreams hand(streams, streams);  // event i: stream i's last kernel
  const auto start = Clock::now();
  for (int i = 0; i < ops; ++i) {
    const int s = i % streams;
    if (i > 0 && streams == 2) hand.Wait(s, 1 - s);
    LaunchSpinIncrement(hand.stream(s), counter, spin_us);
    hand.Record(s, s);
  }
  HandStreams::Finish();
  return SecondsSince(start);
}

// Thread t issues hops t, t + 2, ...: it spins until the turn is its own,
// waits on the other stream's last event, launches, records its own event
// and passes the turn (the event is recorded before the other thread waits
// on it).
double HandChainTwoThreads(int ops, int spin_us, int* counter) {
  const HandStreams hand(2, 2);
  std::atomic<int> turn{0};
  const auto start = Clock::now();
  auto issue = [&](int t) {
    for (int i = t; i < ops; i += 2) {
      while (turn.load(std::memory_order_acquire) != i) {
      }
      if (i > 0) hand.Wait(t, 1 - t);
      LaunchSpinIncrement(hand.stream(t), counter, spin_us);
      hand.Record(t, t);
      turn.store(i + 1, std::memory_order_release);
    }
  };
  std::thread other(issue, 1);
  issue(0);
  other.join();
  HandStreams::Finish();
  return SecondsSince(start);
}

// Stream 0 runs the writes of X; stream k the k-th branch. Event 0 marks a
// round's first kernel, event k branch k.
double HandFanOut(int rounds, int fan_out, int spin_us, const Counters& counters) {
  const HandStreams hand(fan_out + 1, fan_out + 1);
  const auto start = Clock::now();
  for (int r = 0; r < rounds; ++r) {
    LaunchSpinIncrement(hand.stream(0), counters.at(0), spin_us);
    hand.Record(0, 0);
    for (int k = 1; k <= fan_out; ++k) {
      hand.Wait(k, 0);
      LaunchSpinIncrement(hand.stream(k), counters.at(k), spin_us);
      hand.Record(k, k);
    }
    for (int k = 1; k <= fan_out; ++k) hand.Wait(0, k);
    LaunchSpinIncrement(hand.stream(0), counters.at(0), spin_us);
  }
  HandStreams::Finish();
  return SecondsSince(start);
}

double HandIndependent(int ops, int spin_us, int streams, const Counters& counters) {
  const HandStreams hand(streams, /*events=*/0);
  const auto start = Clock::now();
  for (int i = 0; i < ops; ++i) {
    LaunchSpinIncrement(hand.stream(i % streams), counters.at(i), spin_us);
  }
  HandStreams::Finish();
  return SecondsSince(start);
}

}  // namespace ember::bench
