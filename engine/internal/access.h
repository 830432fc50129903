#pragma once

// Access modes as a bit set, so that merging two accesses of one var is an OR
// and "a write wins": read | write == kReadWrite, which is scheduled as a
// write. kReadWrite still remembers the read, which errors use.

#include <cstdint>

namespace ember::engine::internal {

enum class Access : uint8_t { kRead = 1, kWrite = 2, kReadWrite = 3 };

constexpr Access operator|(Access a, Access b) {
  return static_cast<Access>(static_cast<uint8_t>(a) | static_cast<uint8_t>(b));
}
constexpr bool Writes(Access a) { return (static_cast<uint8_t>(a) & 2) != 0; }

}  // namespace ember::engine::internal
