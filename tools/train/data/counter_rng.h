#pragma once

// CounterRng: random numbers that are a pure function of a key, for data
// that must be reproducible at any position: example e of seed s draws from
// CounterRng(Key(s, e)), so reading it needs nothing but (s, e).
//
// The key goes through SplitMix64's finalizer (Steele, Lea and Flood,
// "Fast splittable pseudorandom number generators", 2014), and the stream is
// SplitMix64 from there: a Weyl sequence, each value finalized. Keys that
// differ in one bit give unrelated streams.
//
// Thread safety: a value; one thread at a time.

#include <cstdint>
#include <initializer_list>

namespace ember::train {

// SplitMix64's finalizer: a bijection of 64-bit values that mixes every bit.
[[nodiscard]] constexpr uint64_t Mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A key for the tuple `parts` (order matters).
[[nodiscard]] constexpr uint64_t Key(std::initializer_list<uint64_t> parts) {
  uint64_t h = 0x6a09e667f3bcc909ULL;
  for (uint64_t p : parts) h = Mix64(h ^ Mix64(p + 0x9e3779b97f4a7c15ULL));
  return h;
}

class CounterRng {
 public:
  explicit constexpr CounterRng(uint64_t key) : state_(Mix64(key)) {}

  constexpr uint64_t NextU64() {
    state_ += 0x9e3779b97f4a7c15ULL;
    return Mix64(state_);
  }
  // Uniform in [0, 1), 53 bits.
  constexpr double NextDouble() { return static_cast<double>(NextU64() >> 11) * 0x1.0p-53; }
  // Uniform in (0, 1]: safe under log().
  constexpr double NextOpenDouble() {
    return static_cast<double>((NextU64() >> 11) + 1) * 0x1.0p-53;
  }

 private:
  uint64_t state_;
};

}  // namespace ember::train
