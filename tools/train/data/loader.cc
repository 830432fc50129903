#include "tools/train/data/loader.h"

#include <algorithm>
#include <deque>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <absl/strings/str_cat.h>

#include "engine/base/device.h"
#include "engine/error.h"

namespace ember::train {
namespace {

storage::MemoryKind ChooseKind(const LoaderOptions& options) {
  if (options.kind) {
    if (*options.kind != storage::MemoryKind::kCpu &&
        *options.kind != storage::MemoryKind::kPinned) {
      throw InvalidArgument(absl::StrCat("[Loader] memory kind ",
                                         std::string(storage::ToString(*options.kind)),
                                         " is not a host kind (cpu or pinned)"));
    }
    return *options.kind;
  }
  return GpuCount() > 0 ? storage::MemoryKind::kPinned : storage::MemoryKind::kCpu;
}

int ChooseThreads(const LoaderOptions& options) {
  if (options.threads < 0) {
    throw InvalidArgument(absl::StrCat("[Loader] threads ", options.threads, " is negative"));
  }
  if (options.threads > 0) return options.threads;
  return std::clamp(static_cast<int>(std::thread::hardware_concurrency()) / 2, 1, 8);
}

// The lanes' readers after the first: as many forks as the source gives.
std::vector<std::unique_ptr<BatchSource>> Forks(const BatchSource& source, int threads) {
  std::vector<std::unique_ptr<BatchSource>> forks;
  for (int l = 1; l < threads; ++l) {
    std::unique_ptr<BatchSource> fork = source.Fork();
    if (fork == nullptr) break;
    forks.push_back(std::move(fork));
  }
  return forks;
}

}  // namespace

Loader::Loader(engine::Engine& engine, std::unique_ptr<BatchSource> source,
               const LoaderOptions& options)
    : memory_{.engine = &engine, .kind = ChooseKind(options)},
      depth_(options.depth),
      source_(std::move(source)),
      forks_(source_ == nullptr ? decltype(forks_){} : Forks(*source_, ChooseThreads(options))),
      threads_(1 + static_cast<int>(forks_.size())),
      start_(source_ == nullptr ? 0 : source_->position()),
      lanes_(static_cast<size_t>(threads_)),
      position_(start_) {
  if (source_ == nullptr) throw InvalidArgument("[Loader] no source given");
  if (depth_ < 1) throw InvalidArgument(absl::StrCat("[Loader] depth ", depth_, " is below 1"));
  {
    MutexLock lock(&mu_);
    lanes_[0].source = source_.get();
    for (int l = 1; l < threads_; ++l) lanes_[l].source = forks_[l - 1].get();
  }
  MutexLock lock(&join_mu_);
  for (int l = 0; l < threads_; ++l) workers_.emplace_back([this, l] { Run(l); });
}

Loader::~Loader() { Stop(); }

std::optional<HostBatch> Loader::Make(Lane& lane, int64_t index) {
  if (threads_ == 1) return lane.source->Next(memory_);  // straight through: no Seek
  const int64_t at = start_ + index * lane.source->batch_size();
  const std::optional<int64_t> size = lane.source->size();
  if (size && at >= *size) return std::nullopt;
  lane.source->Seek(at);
  return lane.source->Next(memory_);
}

void Loader::Run(int l) {
  // Each lane holds its share of depth, and at least one batch.
  const int lane_depth = std::max(1, (depth_ + threads_ - 1) / threads_);
  for (int64_t index = l;; index += threads_) {
    Lane* lane;
    {
      MutexLock lock(&mu_);
      lane = &lanes_[l];
      while (!stopped_ && static_cast<int>(lane->queue.size()) >= lane_depth) changed_.Wait(&mu_);
      if (stopped_) return;
    }
    // The source runs unlocked: Pop, Stop and the other lanes go on.
    std::optional<HostBatch> batch;
    std::exception_ptr error;
    try {
      batch = Make(*lane, index);
    } catch (...) {
      error = std::current_exception();
    }
    MutexLock lock(&mu_);
    if (stopped_) return;  // `batch` is dropped with the queues
    if (error || !batch) {
      lane->error = error;
      lane->done = true;
      changed_.SignalAll();
      return;
    }
    lane->queue.push_back(std::move(*batch));
    changed_.SignalAll();
  }
}

std::optional<HostBatch> Loader::Pop() {
  MutexLock lock(&mu_);
  Lane& lane = lanes_[popped_ % threads_];
  while (lane.queue.empty() && !lane.done && !stopped_) changed_.Wait(&mu_);
  if (stopped_) return std::nullopt;
  if (!lane.queue.empty()) {
    HostBatch batch = std::move(lane.queue.front());
    lane.queue.pop_front();
    ++popped_;
    position_ = batch.position;
    changed_.SignalAll();
    return batch;
  }
  // The end or the error sits at this batch: every later one lies past it.
  if (lane.error) std::rethrow_exception(lane.error);
  return std::nullopt;
}

void Loader::Stop() {
  std::vector<std::deque<HostBatch>> dropped;
  {
    MutexLock lock(&mu_);
    stopped_ = true;
    for (Lane& lane : lanes_) dropped.push_back(std::exchange(lane.queue, {}));
    changed_.SignalAll();
  }
  {
    MutexLock lock(&join_mu_);
    for (std::thread& thread : workers_) {
      if (thread.joinable()) thread.join();
    }
  }
  // `dropped` dies here, unlocked: its tensors' vars are deleted through the
  // engine, which never blocks.
}

std::unique_ptr<BatchSource> Loader::TakeSource() {
  Stop();
  int64_t position;
  {
    MutexLock lock(&mu_);
    position = position_;
  }
  MutexLock lock(&join_mu_);  // the joins above ordered the threads' use before this
  if (source_ != nullptr && source_->position() != position) source_->Seek(position);
  return std::move(source_);
}

}  // namespace ember::train
