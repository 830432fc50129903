#include "engine/internal/cuda/sync_object.h"

#include <algorithm>

namespace ember::engine::internal {
namespace {

bool Pending(const StreamEvent& event) {
  return event.stream != nullptr && !event.stream->Passed(event);
}

}  // namespace

void SyncObject::CollectWaits(Access mode, EventWaits* waits) const {
  SpinLockHolder lock(&mu_);
  if (Pending(writer_)) waits->push_back(writer_);
  if (!Writes(mode)) return;
  for (const StreamEvent& reader : readers_) {
    if (Pending(reader)) waits->push_back(reader);
  }
}

void SyncObject::Completed(Access mode, const StreamEvent& event) {
  SpinLockHolder lock(&mu_);
  if (Writes(mode)) {
    readers_.clear();
    writer_ = event;
    return;
  }
  // One reader per stream; readers the GPU has passed go.
  readers_.erase(std::remove_if(readers_.begin(), readers_.end(),
                                [&](const StreamEvent& reader) {
                                  return reader.stream == event.stream || !Pending(reader);
                                }),
                 readers_.end());
  readers_.push_back(event);
}

void SyncObject::Clear() {
  SpinLockHolder lock(&mu_);
  writer_ = StreamEvent{};
  readers_.clear();
}

}  // namespace ember::engine::internal
