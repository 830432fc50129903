#pragma once

// The bits of a VarHandle and of an OprHandle (engine.h), one layout for
// both tables (var_table.h, operator_table.h):
//
//   bits 63..48: engine tag (never 0)   47..24: generation   23..0: slot
//
// The tag tells one engine's handles from another's, the generation a
// handle kept past its object's deletion from the slot's next object.
//
// Thread safety: pure functions.

#include <cstdint>

#include "engine/internal/slot_chunks.h"

namespace ember::engine::internal {

inline constexpr uint32_t kGenerationMask = (1u << 24) - 1;

inline constexpr uint64_t PackHandle(uint16_t tag, uint32_t generation, uint32_t slot) {
  return uint64_t{tag} << 48 | uint64_t{generation & kGenerationMask} << 24 | slot;
}
inline constexpr uint32_t SlotOfHandle(uint64_t bits) {
  return static_cast<uint32_t>(bits & (kMaxSlots - 1));
}
inline constexpr uint32_t GenerationOfHandle(uint64_t bits) {
  return static_cast<uint32_t>(bits >> 24) & kGenerationMask;
}
inline constexpr uint16_t TagOfHandle(uint64_t bits) { return static_cast<uint16_t>(bits >> 48); }

}  // namespace ember::engine::internal
