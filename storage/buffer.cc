#include "storage/buffer.h"

#include <algorithm>
#include <utility>

#include "engine/base/logging.h"
#include "storage/internal/fences.h"
#include "storage/storage_manager.h"

namespace ember::storage {

Buffer::Buffer(Buffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      capacity_(std::exchange(other.capacity_, 0)),
      owner_(std::exchange(other.owner_, nullptr)),
      users_(std::move(other.users_)),
      pending_(std::move(other.pending_)) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    Reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    capacity_ = std::exchange(other.capacity_, 0);
    owner_ = std::exchange(other.owner_, nullptr);
    users_ = std::move(other.users_);
    pending_ = std::move(other.pending_);
  }
  return *this;
}

MemoryKind Buffer::kind() const { return owner_ != nullptr ? owner_->kind() : MemoryKind::kCpu; }

int Buffer::device() const { return owner_ != nullptr ? owner_->device() : -1; }

void Buffer::OrderFirstUse(void* stream) {
  if (!pending_.empty()) internal::OrderAfter(pending_, stream);
  RecordUse(stream);
}

void Buffer::RecordUse(void* stream) {
  if (stream == nullptr) return;
  if (std::find(users_.begin(), users_.end(), stream) == users_.end()) users_.push_back(stream);
}

// Never throws (it runs in destructors): a failure to fence or give back
// the memory is logged, and the memory is lost rather than reused early.
void Buffer::Reset() {
  if (owner_ == nullptr) return;
  try {
    owner_->Return(*this);
  } catch (const std::exception& e) {
    Log().error("releasing a {} buffer of {} bytes failed (memory lost): {}",
                ToString(owner_->kind()), capacity_, e.what());
  }
  data_ = nullptr;
  size_ = capacity_ = 0;
  owner_ = nullptr;
  users_.clear();
  pending_.clear();
}

}  // namespace ember::storage
