#include "engine/internal/cuda/sync_object.h"

#include <algorithm>

namespace ember::engine::internal {

void SyncObject::CollectWaits(Access mode, std::vector<EventRef>* waits) const {
  SpinLockHolder lock(&mu_);
  if (writer_) waits->push_back(writer_);
  if (Writes(mode)) waits->insert(waits->end(), readers_.begin(), readers_.end());
}

void SyncObject::Completed(Access mode, EventRef event) {
  SpinLockHolder lock(&mu_);
  if (Writes(mode)) {
    readers_.clear();
    writer_ = std::move(event);
    return;
  }
  auto same_stream = std::find_if(readers_.begin(), readers_.end(), [&](const EventRef& reader) {
    return reader->stream_id == event->stream_id;
  });
  if (same_stream != readers_.end()) {
    *same_stream = std::move(event);
  } else {
    readers_.push_back(std::move(event));
  }
}

void SyncObject::Clear() {
  SpinLockHolder lock(&mu_);
  writer_.reset();
  readers_.clear();
}

}  // namespace ember::engine::internal
