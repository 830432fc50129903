#pragma once

// HostCopyThreads: a few host threads that split a copy with their caller.
// The host's half of a mapped home's copy-engine fills (host_row_moves.h)
// is thousands of scattered row copies in a prefetch; one core moves them
// at a quarter of four cores' rate (docs/benchmarks.md, "What the rows'
// moves cost the step beside them"). The threads wait between runs, so a
// run costs no thread start. A run is cut into more parts than threads
// and each thread claims the next part when it is free: a thread the host
// starts late finds its share taken by the others instead of making the
// whole run (and the prefetch that waits for it) late.
//
// Thread safety: Run is called by one thread at a time (a cache's
// prefetches are ordered by its state var); the parts run concurrently.

#include <cstdint>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "engine/base/mutex.h"

namespace ember::cache::internal {

class HostCopyThreads {
 public:
  // `threads` threads share a run, the caller's included (1: the caller
  // alone).
  explicit HostCopyThreads(int threads);
  ~HostCopyThreads();
  HostCopyThreads(const HostCopyThreads&) = delete;
  HostCopyThreads& operator=(const HostCopyThreads&) = delete;

  // The parts a run is cut into: 1 for the caller alone, else a few a
  // thread.
  int parts() const { return parts_; }

  // Calls part(p, parts()) once for every p in [0, parts()), each on
  // whichever thread claims it first, the caller's among them, and
  // returns when every part has returned. A part must not throw.
  void Run(absl::FunctionRef<void(int part, int parts)> part);

 private:
  void Work();
  // Runs the current run's parts until none is left to claim.
  void RunParts() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int parts_;
  Mutex mu_;
  CondVar started_;   // a run began, or stop_
  CondVar finished_;  // the current run's last part returned
  const absl::FunctionRef<void(int, int)>* part_ ABSL_GUARDED_BY(mu_) = nullptr;
  uint64_t runs_ ABSL_GUARDED_BY(mu_) = 0;   // runs begun
  int next_part_ ABSL_GUARDED_BY(mu_) = 0;   // the current run's first unclaimed
  int unfinished_ ABSL_GUARDED_BY(mu_) = 0;  // its parts not yet returned
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace ember::cache::internal
