#include "engine/internal/cuda/stream_set.h"

#include <algorithm>

#include "engine/cuda/check.h"
#include "engine/cuda/handles.h"
#include "engine/cuda/scoped_device.h"

namespace ember::engine::internal {

namespace {

// Per thread, for the one set it last used: its streams by device, and
// their rank.
struct ThreadStreams {
  uint64_t owner = 0;
  std::vector<SyncStream*> mine;
  StreamRank rank = StreamRank::kCompute;
};
thread_local ThreadStreams t_streams;

// The calling thread's streams of set `id`, emptied if it last used another.
ThreadStreams& Claim(uint64_t id, int devices) {
  ThreadStreams& t = t_streams;
  if (t.owner != id) t = {.owner = id, .mine = std::vector<SyncStream*>(devices, nullptr)};
  return t;
}

// The CUDA priority of `rank` on the current device. CUDA's default is its
// lowest priority, so the copy rank keeps it and the others go above it.
int PriorityOf(StreamRank rank) {
  int least = 0;
  int greatest = 0;
  CudaCheck(cudaDeviceGetStreamPriorityRange(&least, &greatest),
            "cudaDeviceGetStreamPriorityRange");
  const int steps = static_cast<int>(rank) - static_cast<int>(StreamRank::kCopy);
  return std::max(least - steps, greatest);  // a higher priority is a smaller number
}

}  // namespace

StreamSet::StreamSet(int devices, int round_robin, std::size_t max_events, bool ranked)
    : id_(next_id_.fetch_add(1) + 1), devices_(devices), max_events_(max_events), ranked_(ranked) {
  if (round_robin > 0) {
    for (int d = 0; d < devices; ++d) {
      const ScopedDevice on_device(d);
      auto& ring = shared_.emplace_back();
      // No rank: one pool runs every kind of op.
      for (int i = 0; i < round_robin; ++i) ring.push_back(Make(std::nullopt));
    }
  }
  turns_ = std::vector<std::atomic<uint32_t>>(shared_.size());
}

SyncStream* StreamSet::For(int device) {
  if (!shared_.empty()) {
    const auto& ring = shared_[device];
    return ring[turns_[device].fetch_add(1, std::memory_order_relaxed) % ring.size()];
  }
  ThreadStreams& t = Claim(id_, devices_);
  if (t.mine[device] == nullptr) t.mine[device] = Make(t.rank);
  return t.mine[device];
}

void StreamSet::SetThreadRank(StreamRank rank) {
  if (shared_.empty()) Claim(id_, devices_).rank = rank;
}

void StreamSet::ForEach(const std::function<void(SyncStream&)>& fn) {
  MutexLock lock(&mu_);
  for (auto& stream : all_) fn(*stream);
}

void StreamSet::Clear() {
  MutexLock lock(&mu_);
  all_.clear();
}

SyncStream* StreamSet::Make(std::optional<StreamRank> rank) {
  CudaStream stream = ranked_ && rank.has_value()
                          ? CudaStream::CreateAt(PriorityOf(*rank), "cudaStreamCreateWithPriority")
                          : CudaStream::Create("cudaStreamCreateWithFlags");
  MutexLock lock(&mu_);
  all_.push_back(std::make_unique<SyncStream>(stream.release(), next_stream_id_++, max_events_));
  return all_.back().get();
}

}  // namespace ember::engine::internal
