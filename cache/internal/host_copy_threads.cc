#include "cache/internal/host_copy_threads.h"

namespace ember::cache::internal {
namespace {

// Parts a thread, a run's: enough that the threads that start first can
// take a late one's share, few enough that each part is thousands of
// rows, not a handful.
constexpr int kPartsPerThread = 4;

}  // namespace

HostCopyThreads::HostCopyThreads(int threads)
    : parts_(threads > 1 ? threads * kPartsPerThread : 1) {
  if (threads > 1) threads_.reserve(threads - 1);
  for (int t = 1; t < threads; ++t) threads_.emplace_back([this] { Work(); });
}

HostCopyThreads::~HostCopyThreads() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
    started_.SignalAll();
  }
  for (std::thread& thread : threads_) thread.join();
}

void HostCopyThreads::Run(absl::FunctionRef<void(int, int)> part) {
  MutexLock lock(&mu_);
  part_ = &part;
  next_part_ = 0;
  unfinished_ = parts_;
  ++runs_;
  started_.SignalAll();
  RunParts();
  while (unfinished_ > 0) finished_.Wait(&mu_);
  part_ = nullptr;
}

void HostCopyThreads::RunParts() {
  while (next_part_ < parts_) {
    const int p = next_part_++;
    const absl::FunctionRef<void(int, int)>& part = *part_;
    mu_.Unlock();
    part(p, parts_);
    mu_.Lock();
    if (--unfinished_ == 0) finished_.Signal();
  }
}

void HostCopyThreads::Work() {
  MutexLock lock(&mu_);
  uint64_t seen = 0;
  for (;;) {
    while (!stop_ && runs_ == seen) started_.Wait(&mu_);
    if (stop_) return;
    seen = runs_;
    RunParts();  // nothing left where this thread woke after the run ended
  }
}

}  // namespace ember::cache::internal
