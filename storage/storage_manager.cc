#include "storage/storage_manager.h"

#include <utility>

#include "storage/internal/fences.h"

namespace ember::storage {

Buffer StorageManager::Alloc(std::size_t bytes) { return Make(bytes, nullptr); }

Buffer StorageManager::Alloc(std::size_t bytes, void* stream) {
  Buffer buffer = Make(bytes, stream);
  buffer.OrderFirstUse(stream);
  return buffer;
}

Buffer StorageManager::Make(std::size_t bytes, void* stream) {
  Buffer buffer;
  if (bytes == 0) return buffer;
  Block block = Take(bytes, stream);
  buffer.data_ = block.data;
  buffer.size_ = bytes;
  buffer.capacity_ = block.capacity;
  buffer.owner_ = this;
  buffer.pending_ = std::move(block.pending);
  return buffer;
}

// A buffer released before its first use was ordered still carries its
// previous owners' fences: they stay with the block, beside the new ones.
void StorageManager::Return(Buffer& buffer) {
  Block block{buffer.data_, buffer.capacity_, internal::RecordFences(buffer.users_)};
  for (Fence& fence : buffer.pending_) block.pending.push_back(fence);
  buffer.pending_.clear();
  Give(std::move(block));
}

}  // namespace ember::storage
