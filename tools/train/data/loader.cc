#include "tools/train/data/loader.h"

#include <algorithm>
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
  return options.threads > 0 ? options.threads : DefaultLoaderThreads();
}

// The threads' readers after the first: as many forks as the source gives.
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

int DefaultLoaderThreads(int loaders) {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::clamp((cores - 4 * loaders) / std::max(loaders, 1), 1, 16);
}

Loader::Loader(engine::Engine& engine, std::unique_ptr<BatchSource> source,
               const LoaderOptions& options)
    : memory_{.engine = &engine, .kind = ChooseKind(options)},
      depth_(options.depth),
      source_(std::move(source)),
      forks_(source_ == nullptr ? decltype(forks_){} : Forks(*source_, ChooseThreads(options))),
      threads_(1 + static_cast<int>(forks_.size())),
      start_(source_ == nullptr ? 0 : source_->position()),
      check_(options.check),
      position_(start_) {
  if (source_ == nullptr) throw InvalidArgument("[Loader] no source given");
  if (depth_ < 1) throw InvalidArgument(absl::StrCat("[Loader] depth ", depth_, " is below 1"));
  MutexLock lock(&join_mu_);
  workers_.emplace_back([this] { Run(source_.get()); });
  for (auto& fork : forks_) workers_.emplace_back([this, reader = fork.get()] { Run(reader); });
}

Loader::~Loader() { Stop(); }

std::optional<HostBatch> Loader::Make(BatchSource& reader, int64_t index) {
  if (threads_ == 1) return reader.Next(memory_);  // straight through: no Seek
  const int64_t at = start_ + index * reader.batch_size();
  const std::optional<int64_t> size = reader.size();
  if (size && at >= *size) return std::nullopt;
  reader.Seek(at);
  return reader.Next(memory_);
}

void Loader::Run(BatchSource* reader) {
  const int64_t ahead = int64_t{depth_} + threads_;
  for (;;) {
    int64_t index;
    {
      MutexLock lock(&mu_);
      while (!stopped_ && claimed_ < end_ && claimed_ >= popped_ + ahead) changed_.Wait(&mu_);
      if (stopped_ || claimed_ >= end_) return;
      index = claimed_++;
    }
    // The source runs unlocked: Pop, Stop and the other threads go on.
    std::optional<HostBatch> batch;
    std::exception_ptr error;
    try {
      batch = Make(*reader, index);
      if (batch && check_) check_(*batch);
    } catch (...) {
      error = std::current_exception();
    }
    // Declared after `batch`, so that a batch made past the end dies
    // unlocked (its tensors' vars are deleted through the engine).
    MutexLock lock(&mu_);
    if (stopped_) return;
    if (error || !batch) {
      // Every index before this one is claimed: this thread has no more to do.
      if (index < end_) {
        end_ = index;
        error_ = error;
      }
      changed_.SignalAll();
      return;
    }
    if (index < end_) ready_.emplace(index, std::move(*batch));
    changed_.SignalAll();
  }
}

std::optional<HostBatch> Loader::Pop() {
  MutexLock lock(&mu_);
  while (!stopped_ && popped_ < end_ && !ready_.contains(popped_)) changed_.Wait(&mu_);
  if (stopped_) return std::nullopt;
  if (auto it = ready_.find(popped_); it != ready_.end()) {
    HostBatch batch = std::move(it->second);
    ready_.erase(it);
    ++popped_;
    position_ = batch.position;
    changed_.SignalAll();
    return batch;
  }
  // The end or the error sits at this batch: every later one lies past it.
  if (error_) std::rethrow_exception(error_);
  return std::nullopt;
}

void Loader::Stop() {
  absl::flat_hash_map<int64_t, HostBatch> dropped;
  {
    MutexLock lock(&mu_);
    stopped_ = true;
    dropped.swap(ready_);
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
