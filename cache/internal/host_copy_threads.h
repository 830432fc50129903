#pragma once

// HostCopyThreads: a few host threads that split a copy with their caller.
// The host's half of a mapped home's copy-engine fills (host_row_moves.h)
// is thousands of scattered row copies in a prefetch; one core moves them
// at a quarter of four cores' rate (docs/benchmarks.md, "What the rows'
// moves cost the step beside them"). The threads wait on a barrier between
// runs, so a run costs no thread start.
//
// Thread safety: Run is called by one thread at a time (a cache's
// prefetches are ordered by its state var); the parts run concurrently.

#include <barrier>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"

namespace ember::cache::internal {

class HostCopyThreads {
 public:
  // `threads` parts a run, the caller's included (1: the caller alone).
  explicit HostCopyThreads(int threads);
  ~HostCopyThreads();
  HostCopyThreads(const HostCopyThreads&) = delete;
  HostCopyThreads& operator=(const HostCopyThreads&) = delete;

  int parts() const { return parts_; }

  // Calls part(p, parts()) for every p in [0, parts()), part 0 on the
  // caller, and returns when every part has returned. A part must not
  // throw.
  void Run(absl::FunctionRef<void(int part, int parts)> part);

 private:
  void Work(int part);

  const int parts_;
  std::barrier<> start_;
  std::barrier<> done_;
  // Written by Run (or the destructor) before start_, read by the threads
  // after it.
  const absl::FunctionRef<void(int, int)>* part_ = nullptr;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace ember::cache::internal
