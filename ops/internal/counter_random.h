#pragma once

// Counter-based random numbers for RandomUniform and RandomNormal: element i
// of a tensor filled with seed s is a pure function of (s, i). So the CPU
// and the GPU kernels produce the same bits, whatever their thread count or
// launch shape, and a larger tensor filled with the same seed starts with
// the same values.
//
// Bits: the i-th output of a splitmix64 generator (Steele, Lea and Flood,
// 2014) whose state starts at splitmix64(seed); an output costs one hash.
//
// Same bits on both compilers. Only operations that IEEE 754 rounds
// correctly are used (+, -, *, /, sqrt, fma and conversions), because
// libm's and CUDA's log and cos differ in the last bit; Box-Muller's log
// and cos are written here as polynomials. nvcc fuses a * b + c into an fma
// by default and g++ in ISO mode does not, so every multiply-add is an
// explicit fma and no other product feeds an addition.
//
// Thread safety: pure functions.

#include <cmath>
#include <cstdint>

#include "ops/internal/host_device.h"

namespace ember::ops::internal {

EMBER_HOST_DEVICE inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The 64 random bits number `counter` of stream `seed`.
EMBER_HOST_DEVICE inline uint64_t RandomBits(uint64_t seed, uint64_t counter) {
  return SplitMix64(SplitMix64(seed) + counter * 0x9e3779b97f4a7c15ull);
}

// floor(log2(n)) for n > 0, by halving the search range (no intrinsics).
EMBER_HOST_DEVICE inline int FloorLog2(uint64_t n) {
  int e = 0;
  for (int shift = 32; shift > 0; shift /= 2) {
    if ((n >> shift) != 0) {
      n >>= shift;
      e += shift;
    }
  }
  return e;
}

// ln(n * 2^-53) for n in [1, 2^53]: n = m * 2^e with m in [sqrt(2)/2,
// sqrt(2)] (exact), ln(m) = 2 atanh(s) with s = (m-1)/(m+1), |s| < 0.172, by
// its series to s^25 (truncation below 1e-19), plus (e - 53) ln 2 with
// fdlibm's split ln 2.
EMBER_HOST_DEVICE inline double LogOfUnit(uint64_t n) {
  int e = FloorLog2(n);
  double m = static_cast<double>(n) / static_cast<double>(uint64_t{1} << e);
  if (m > 1.4142135623730951) {
    m *= 0.5;
    ++e;
  }
  const double f = m - 1.0;  // exact (Sterbenz)
  const double s = f / (2.0 + f);
  const double z = s * s;
  double p = 0.0;
  for (int k = 12; k >= 1; --k) p = fma(p, z, 1.0 / (2 * k + 1));
  const double two_s = 2.0 * s;
  const double log_m = fma(two_s, z * p, two_s);
  const double k = static_cast<double>(e - 53);
  return fma(k, 6.93147180369123816490e-01, fma(k, 1.90821492927058770002e-10, log_m));
}

// cos(2 pi n 2^-53) for n in [0, 2^53): the nearest quarter turn q is taken
// off in integers (exact), leaving |a| <= pi/4, where Taylor series to a^20
// (cos) and a^21 (sin) are below 1e-19 off.
EMBER_HOST_DEVICE inline double CosOfTurn(uint64_t n) {
  const uint64_t quarter = (n + (uint64_t{1} << 50)) >> 51;  // 0 .. 4
  const auto rest = static_cast<int64_t>(n) - static_cast<int64_t>(quarter << 51);
  const double a = static_cast<double>(rest) * 0x1p-51 * 1.5707963267948966;
  const double a2 = a * a;
  double cos_coeff[11];
  double sin_coeff[11];
  cos_coeff[0] = 1.0;
  sin_coeff[0] = 1.0;
  for (int k = 1; k <= 10; ++k) {
    cos_coeff[k] = -cos_coeff[k - 1] / ((2 * k - 1) * (2 * k));
    sin_coeff[k] = -sin_coeff[k - 1] / ((2 * k) * (2 * k + 1));
  }
  double c = 0.0;
  double s = 0.0;
  for (int k = 10; k >= 0; --k) {
    c = fma(c, a2, cos_coeff[k]);
    s = fma(s, a2, sin_coeff[k]);
  }
  s *= a;
  switch (quarter & 3) {
    case 0:
      return c;
    case 1:
      return -s;
    case 2:
      return -c;
    default:
      return s;
  }
}

// Uniform in [lo, hi) (hi itself only by rounding): 24 random bits, exact in
// a float, scaled with one fma.
EMBER_HOST_DEVICE inline float UniformAt(uint64_t seed, uint64_t i, float lo, float hi) {
  const float u = static_cast<float>(RandomBits(seed, i) >> 40) * 0x1p-24f;
  return fmaf(hi - lo, u, lo);
}

// Normal(mean, stddev) by Box-Muller in double from counters 2i and 2i+1:
// sqrt(-2 ln u1) cos(2 pi u2) with u1 in (0, 1] and u2 in [0, 1), 53 bits
// each.
EMBER_HOST_DEVICE inline float NormalAt(uint64_t seed, uint64_t i, float mean, float stddev) {
  const uint64_t u1 = (RandomBits(seed, 2 * i) >> 11) + 1;
  const uint64_t u2 = RandomBits(seed, 2 * i + 1) >> 11;
  const double z = sqrt(-2.0 * LogOfUnit(u1)) * CosOfTurn(u2);
  return fmaf(stddev, static_cast<float>(z), mean);
}

}  // namespace ember::ops::internal
