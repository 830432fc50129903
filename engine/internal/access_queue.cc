#include "engine/internal/access_queue.h"

#include <cstdint>
#include <new>

#include "engine/internal/block_pool.h"
#include "engine/internal/prefetch.h"

namespace ember::engine::internal {

// One cache line: the consumer's and the producer's positions, which
// entries write, and six entries. Both ends move under the var's lock only.
struct alignas(64) AccessQueue::Chunk {
  static constexpr uint8_t kEntries = 6;

  Chunk* next = nullptr;
  uint8_t begin = 0;   // the first live entry
  uint8_t end = 0;     // one past the last
  uint8_t writes = 0;  // bit i: entry i writes
  OprBlock* blocks[kEntries] = {};

  [[nodiscard]] Entry At(uint8_t i) const { return {blocks[i], ((writes >> i) & 1) != 0}; }
};

AccessQueue::Spent::~Spent() {
  while (head_ != nullptr) {
    Chunk* next = head_->next;
    head_->~Chunk();
    BlockPool::Free(head_, sizeof(Chunk));
    head_ = next;
  }
}

void AccessQueue::Reserve(std::size_t pushes) {
  static_assert(sizeof(Chunk) == 64, "a chunk is one cache line");
  BlockPool::Reserve(sizeof(Chunk), pushes);
}

void AccessQueue::GiveBackReserve() { BlockPool::TrimReserve(sizeof(Chunk), kKeptReserve); }

AccessQueue::~AccessQueue() {
  Spent spent;
  Clear(&spent);
}

AccessQueue::Entry AccessQueue::front() const { return head_->At(head_->begin); }

// Any chunk but the tail is full, so a used-up head is followed by another
// chunk unless it is the tail.
void AccessQueue::PopFront(Spent* spent) {
  Chunk* chunk = head_;
  if (++chunk->begin < chunk->end) return;
  if (chunk == tail_) {
    head_ = tail_ = nullptr;
  } else {
    head_ = chunk->next;
  }
  chunk->next = spent->head_;
  spent->head_ = chunk;
}

void AccessQueue::Push(OprBlock* block, Access mode) {
  if (tail_ == nullptr || tail_->end == Chunk::kEntries) {
    auto* chunk = new (BlockPool::TakeReserved(sizeof(Chunk))) Chunk;
    if (tail_ == nullptr) {
      head_ = chunk;
    } else {
      tail_->next = chunk;
    }
    tail_ = chunk;
  }
  if (Writes(mode)) tail_->writes |= static_cast<uint8_t>(1u << tail_->end);
  tail_->blocks[tail_->end++] = block;
}

void AccessQueue::PrefetchFront() const {
  if (head_->next != nullptr) PrefetchForWrite(head_->next);
  for (uint8_t i = head_->begin; i < head_->end; ++i) {
    const Entry entry = head_->At(i);
    PrefetchForWrite(entry.block);
    if (entry.writes) return;
  }
}

void AccessQueue::Clear(Spent* spent) {
  while (head_ != nullptr) {
    Chunk* next = head_->next;
    head_->next = spent->head_;
    spent->head_ = head_;
    head_ = next;
  }
  tail_ = nullptr;
}

}  // namespace ember::engine::internal
