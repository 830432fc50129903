#include "engine/internal/cuda/stream_set.h"

#include "engine/cuda/check.h"
#include "engine/cuda/handles.h"
#include "engine/cuda/scoped_device.h"

namespace ember::engine::internal {

StreamSet::StreamSet(int devices, int round_robin, std::size_t max_events)
    : id_(next_id_.fetch_add(1) + 1), devices_(devices), max_events_(max_events) {
  if (round_robin > 0) {
    for (int d = 0; d < devices; ++d) {
      const ScopedDevice on_device(d);
      auto& ring = shared_.emplace_back();
      for (int i = 0; i < round_robin; ++i) ring.push_back(Make());
    }
  }
  turns_ = std::vector<std::atomic<uint32_t>>(shared_.size());
}

SyncStream* StreamSet::For(int device) {
  if (!shared_.empty()) {
    const auto& ring = shared_[device];
    return ring[turns_[device].fetch_add(1, std::memory_order_relaxed) % ring.size()];
  }
  // Per thread, per set: the streams this thread made, by device.
  thread_local uint64_t owner = 0;
  thread_local std::vector<SyncStream*> mine;
  if (owner != id_) {
    owner = id_;
    mine.assign(devices_, nullptr);
  }
  if (mine[device] == nullptr) mine[device] = Make();
  return mine[device];
}

void StreamSet::ForEach(const std::function<void(SyncStream&)>& fn) {
  MutexLock lock(&mu_);
  for (auto& stream : all_) fn(*stream);
}

void StreamSet::Clear() {
  MutexLock lock(&mu_);
  all_.clear();
}

SyncStream* StreamSet::Make() {
  CudaStream stream = CudaStream::Create("cudaStreamCreateWithFlags");
  MutexLock lock(&mu_);
  all_.push_back(std::make_unique<SyncStream>(stream.release(), next_stream_id_++, max_events_));
  return all_.back().get();
}

}  // namespace ember::engine::internal
