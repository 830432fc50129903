#include "tools/train/data/loader.h"

#include <deque>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include <absl/strings/str_cat.h>

#include "engine/base/device.h"
#include "engine/base/logging.h"
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

}  // namespace

Loader::Loader(engine::Engine& engine, std::unique_ptr<BatchSource> source,
               const LoaderOptions& options)
    : memory_{.engine = &engine, .kind = ChooseKind(options)},
      depth_(options.depth),
      source_(std::move(source)) {
  if (source_ == nullptr) throw InvalidArgument("[Loader] no source given");
  if (depth_ < 1) throw InvalidArgument(absl::StrCat("[Loader] depth ", depth_, " is below 1"));
  MutexLock lock(&join_mu_);
  thread_ = std::thread([this] { Run(); });
}

Loader::~Loader() { Stop(); }

void Loader::Run() {
  for (;;) {
    {
      MutexLock lock(&mu_);
      while (!stopped_ && static_cast<int>(queue_.size()) >= depth_) changed_.Wait(&mu_);
      if (stopped_) return;
    }
    // The source runs unlocked: Pop and Stop go on meanwhile.
    std::optional<HostBatch> batch;
    std::exception_ptr error;
    try {
      batch = source_->Next(memory_);
    } catch (...) {
      error = std::current_exception();
    }
    MutexLock lock(&mu_);
    if (stopped_) return;  // `batch` is dropped with the queue
    if (error || !batch) {
      error_ = error;
      done_ = true;
      changed_.SignalAll();
      return;
    }
    queue_.push_back(std::move(*batch));
    changed_.SignalAll();
  }
}

std::optional<HostBatch> Loader::Pop() {
  MutexLock lock(&mu_);
  while (queue_.empty() && !done_ && !stopped_) changed_.Wait(&mu_);
  if (!queue_.empty() && !stopped_) {
    HostBatch batch = std::move(queue_.front());
    queue_.pop_front();
    changed_.SignalAll();
    return batch;
  }
  if (error_ && !stopped_) std::rethrow_exception(error_);
  return std::nullopt;
}

void Loader::Stop() {
  std::deque<HostBatch> dropped;
  {
    MutexLock lock(&mu_);
    stopped_ = true;
    dropped.swap(queue_);
    changed_.SignalAll();
  }
  {
    MutexLock lock(&join_mu_);
    if (thread_.joinable()) thread_.join();
  }
  // `dropped` dies here, unlocked: its tensors' vars are deleted through the
  // engine, which never blocks.
}

std::unique_ptr<BatchSource> Loader::TakeSource() {
  Stop();
  MutexLock lock(&join_mu_);  // the join above ordered the thread's use before this
  return std::move(source_);
}

}  // namespace ember::train
