#include "engine/internal/var_table.h"

#include <fmt/format.h>

#include "engine/error.h"
#include "engine/internal/handle_bits.h"

namespace ember::engine::internal {
namespace {

uint32_t IndexOf(VarHandle h) { return SlotOfHandle(h.bits()); }
uint16_t TagOf(VarHandle h) { return TagOfHandle(h.bits()); }

}  // namespace

VarTable::VarTable(uint16_t tag) : tag_(tag) {}

VarTable::~VarTable() = default;

VarHandle VarTable::HandleFor(uint32_t index, uint32_t generation) const {
  return VarHandle::FromBits(PackHandle(tag_, generation, index));
}

VarHandle VarTable::New() {
  MutexLock lock(&mu_);
  uint32_t index;
  if (!free_.empty()) {
    index = free_.back();
    free_.pop_back();
  } else {
    if (next_index_ == kMaxSlots) {
      throw Error(fmt::format(
          "[Engine::NewVariable] all {} var slots are live; delete vars that are no longer used",
          next_index_));
    }
    index = next_index_++;
  }
  const Var& var = vars_.At(index, [](Var& made, uint32_t slot) { made.set_slot(slot); });
  return HandleFor(index, var.generation());
}

VarTable::Lookup VarTable::Locate(VarHandle handle, Var** var) const {
  if (handle.is_null()) return Lookup::kNull;
  if (TagOf(handle) != tag_) return Lookup::kForeign;
  Var* slot = vars_.Find(IndexOf(handle));
  if (slot == nullptr) return Lookup::kForeign;
  *var = slot;
  return Lookup::kOk;
}

VarTable::Lookup VarTable::Find(VarHandle handle, Var** var) const {
  const Lookup found = Locate(handle, var);
  if (found != Lookup::kOk) return found;
  return IsCurrent(GenerationOf(handle), **var) ? Lookup::kOk : Lookup::kStale;
}

uint32_t VarTable::GenerationOf(VarHandle handle) { return GenerationOfHandle(handle.bits()); }

bool VarTable::IsCurrent(uint32_t generation, const Var& var) {
  return (var.generation() & kGenerationMask) == generation;
}

void VarTable::Recycle(Var* var) {
  var->ResetForReuse();
  MutexLock lock(&mu_);
  free_.push_back(var->slot());
}

const char* VarTable::Describe(Lookup lookup) {
  switch (lookup) {
    case Lookup::kOk:
      return "is valid";
    case Lookup::kNull:
      return "is a null handle (never made by NewVariable)";
    case Lookup::kForeign:
      return "belongs to another engine (or was never made by NewVariable)";
    case Lookup::kStale:
      return "is stale: its var was deleted";
  }
  return "is invalid";
}

}  // namespace ember::engine::internal
