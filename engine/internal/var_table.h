#pragma once

// VarTable: the vars of one engine, named by handles that carry a slot index,
// the slot's generation and the engine's tag (handle_bits.h).
//
// Slots live in fixed chunks (SlotChunks) never freed while the engine lives, so
// resolving a stale handle reads valid memory and is refused by the
// generation check instead of touching a freed var. A deleted var's slot is
// reused with the next generation.
//
// Thread safety: thread-safe.

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/base/mutex.h"
#include "engine/engine.h"
#include "engine/internal/slot_chunks.h"
#include "engine/internal/var.h"

namespace ember::engine::internal {

class VarTable {
 public:
  enum class Lookup { kOk, kNull, kForeign, kStale };

  explicit VarTable(uint16_t tag);
  ~VarTable();
  VarTable(const VarTable&) = delete;
  VarTable& operator=(const VarTable&) = delete;

  // A fresh var. Throws Error when every one of the 2^24 slots is live.
  VarHandle New();

  // Finds the var a handle names; `*var` is set for kOk and kStale.
  Lookup Find(VarHandle handle, Var** var) const;
  // Find without the generation check, which reads the var itself: the push
  // path rechecks the generation under the var's lock anyway, and skipping it
  // here saves a cache miss per var. Never returns kStale.
  Lookup Locate(VarHandle handle, Var** var) const;

  // The generation a handle names, and whether `var` is still at it (not
  // deleted since).
  [[nodiscard]] static uint32_t GenerationOf(VarHandle handle);
  [[nodiscard]] static bool IsCurrent(uint32_t generation, const Var& var);

  // Returns a deleted var's slot for reuse. REQUIRES: no op refers to it.
  void Recycle(Var* var);

  // Explains a failed lookup, e.g. "is stale: its var was deleted".
  [[nodiscard]] static const char* Describe(Lookup lookup);

 private:
  VarHandle HandleFor(uint32_t index, uint32_t generation) const;

  const uint16_t tag_;
  SlotChunks<Var> vars_;
  Mutex mu_;
  std::vector<uint32_t> free_ ABSL_GUARDED_BY(mu_);
  uint32_t next_index_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ember::engine::internal
