#include "cache/internal/host_copy_threads.h"

#include <algorithm>

namespace ember::cache::internal {

HostCopyThreads::HostCopyThreads(int threads)
    : parts_(std::max(threads, 1)), start_(parts_), done_(parts_) {
  threads_.reserve(parts_ - 1);
  for (int p = 1; p < parts_; ++p) threads_.emplace_back([this, p] { Work(p); });
}

HostCopyThreads::~HostCopyThreads() {
  stop_ = true;
  start_.arrive_and_wait();
  for (std::thread& thread : threads_) thread.join();
}

void HostCopyThreads::Run(absl::FunctionRef<void(int, int)> part) {
  part_ = &part;
  start_.arrive_and_wait();
  part(0, parts_);
  done_.arrive_and_wait();
  part_ = nullptr;
}

void HostCopyThreads::Work(int part) {
  for (;;) {
    start_.arrive_and_wait();
    if (stop_) return;
    (*part_)(part, parts_);
    done_.arrive_and_wait();
  }
}

}  // namespace ember::cache::internal
