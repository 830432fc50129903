#include "engine/internal/operator_table.h"

#include <fmt/format.h>

#include "engine/error.h"
#include "engine/internal/handle_bits.h"

namespace ember::engine::internal {
namespace {

uint32_t SlotOf(OprHandle h) { return SlotOfHandle(h.bits()); }
uint32_t GenerationOf(OprHandle h) { return GenerationOfHandle(h.bits()); }
uint16_t TagOf(OprHandle h) { return TagOfHandle(h.bits()); }
// Generations run 1..2^24 - 1 and wrap (a handle is never all zero).
uint32_t NextGeneration(uint32_t g) { return (g & kGenerationMask) == kGenerationMask ? 1 : g + 1; }

}  // namespace

OperatorTable::OperatorTable(uint16_t tag) : tag_(tag) {}

void OperatorTable::ReleaseAll() {
  std::vector<Operator*> live;
  {
    MutexLock lock(&mu_);
    for (uint32_t i = 0; i < slots_.size(); ++i) {
      Slot& slot = slots_[i];
      if (slot.op == nullptr) continue;
      live.push_back(slot.op);
      slot.op = nullptr;
      slot.generation = NextGeneration(slot.generation);
      free_.push_back(i);
    }
  }
  for (Operator* op : live) op->Unref();
}

OprHandle OperatorTable::Add(Operator* op) {
  {
    MutexLock lock(&mu_);
    if (!free_.empty() || slots_.size() < kMaxSlots) {
      uint32_t index = 0;
      if (!free_.empty()) {
        index = free_.back();
        free_.pop_back();
      } else {
        index = static_cast<uint32_t>(slots_.size());
        slots_.emplace_back();
      }
      Slot& slot = slots_[index];
      slot.op = op;
      return OprHandle::FromBits(PackHandle(tag_, slot.generation, index));
    }
  }
  op->Unref();  // outside the lock: its function's destructor may call the engine
  throw Error(fmt::format(
      "[Engine::NewOperator] all {} operator slots are live; delete operators that are no longer "
      "used",
      kMaxSlots));
}

OperatorTable::Slot& OperatorTable::Resolve(OprHandle handle, std::string_view where) {
  if (handle.is_null()) throw InvalidArgument(fmt::format("[{}] null operator handle", where));
  if (TagOf(handle) != tag_ || SlotOf(handle) >= slots_.size()) {
    throw InvalidArgument(fmt::format(
        "[{}] the operator handle belongs to another engine (or was never made by NewOperator)",
        where));
  }
  Slot& slot = slots_[SlotOf(handle)];
  if (slot.op != nullptr && slot.generation == GenerationOf(handle)) return slot;
  // The last delete of the slot was this handle's when the generation moved
  // on by one since: then its operator's name is known.
  const bool last = NextGeneration(GenerationOf(handle)) == slot.generation;
  throw UsageError(fmt::format("[{}] operator {}was deleted (a stale handle)", where,
                               last ? fmt::format("'{}' ", slot.deleted_name) : ""));
}

Operator* OperatorTable::Acquire(OprHandle handle, std::string_view where) {
  MutexLock lock(&mu_);
  Operator* op = Resolve(handle, where).op;
  op->Ref();
  return op;
}

void OperatorTable::Remove(OprHandle handle, std::string_view where) {
  Operator* op = nullptr;
  {
    MutexLock lock(&mu_);
    Slot& slot = Resolve(handle, where);
    op = slot.op;
    slot.op = nullptr;
    slot.deleted_name = op->name();
    slot.generation = NextGeneration(slot.generation);
    free_.push_back(SlotOf(handle));
  }
  op->Unref();  // outside the lock: the last reference deletes the operator
}

}  // namespace ember::engine::internal
