#pragma once

// The hand-written side of the GPU cases: one thread issuing the same
// kernels as the engine side, on its own streams, with the fewest event
// waits that keep the same order. Each returns the seconds from its first
// launch until the device is idle; streams and events are made before the
// clock starts. Counters is the device memory both sides increment.

#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "tools/bench/common/cuda_device.h"

namespace ember::bench {

// Device ints that the kernels increment: zeroed before a run, read after.
class Counters {
 public:
  explicit Counters(int size);
  ~Counters();
  Counters(const Counters&) = delete;
  Counters& operator=(const Counters&) = delete;

  [[nodiscard]] int* at(int i) const { return data_ + i; }

  // cudaMemset runs on the legacy stream, which the engines' non-blocking
  // streams do not wait for: the device sync makes sure it is done.
  void Zero();

  // True when the first expected.size() counters hold `expected`; names the
  // first one that differs on stderr otherwise.
  [[nodiscard]] bool Match(const std::string& who, const std::vector<int>& expected) const;

 private:
  const int size_;
  int* data_ = nullptr;
};

// `ops` kernels each incrementing `counter`: on 2 streams, alternating, each
// waiting for the other's last; on 1, in stream order alone.
double HandChain(int ops, int spin_us, int streams, int* counter);

// The same 2-stream chain issued by two threads, one per stream, taking
// turns: what handing each hop to another thread costs the CUDA calls.
double HandChainTwoThreads(int ops, int spin_us, int* counter);

// `rounds` of: a kernel on counter 0, then `fan_out` kernels on counters
// 1..fan_out that follow it on streams of their own, then a kernel on
// counter 0 that follows them all.
double HandFanOut(int rounds, int fan_out, int spin_us, const Counters& counters);

// `ops` independent kernels spread round-robin over `streams` streams.
double HandIndependent(int ops, int spin_us, int streams, const Counters& counters);

}  // namespace ember::bench
