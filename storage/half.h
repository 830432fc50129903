#pragma once

// f16 and bf16 <-> f32 on the host, rounding to nearest even (as CUDA's
// __float2half_rn and __float2bfloat16_rn do, so that CPU and GPU kernels
// store the same bits): what a program filling or reading a kF16 or kBF16
// tensor on the host uses (the raw bits are Float16::bits, BFloat16::bits).
//
// Thread safety: pure functions.

#include <bit>
#include <cstdint>

namespace ember::storage {

inline float Bf16ToFloat(uint16_t bits) { return std::bit_cast<float>(uint32_t{bits} << 16); }

inline uint16_t FloatToBf16(float value) {
  const uint32_t u = std::bit_cast<uint32_t>(value);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

inline float HalfToFloat(uint16_t bits) {
  const uint32_t sign = uint32_t{bits & 0x8000u} << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0)
    return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
  if (mantissa == 0) return std::bit_cast<float>(sign);
  // Subnormal: normalize.
  int shift = 0;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    ++shift;
  }
  mantissa &= 0x3ffu;
  return std::bit_cast<float>(sign | (static_cast<uint32_t>(113 - shift) << 23) | (mantissa << 13));
}

inline uint16_t FloatToHalf(float value) {
  const uint32_t u = std::bit_cast<uint32_t>(value);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds to infinity (or is)
  if (abs >= 0x38800000u) {                       // normal in f16
    const uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
    return sign | static_cast<uint16_t>((rounded - 0x38000000u) >> 13);
  }
  if (abs < 0x33000000u) return sign;  // below half the smallest subnormal
  // Subnormal in f16: shift the full mantissa into place, rounding to even.
  const uint32_t exponent = abs >> 23;
  const uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - exponent;  // 14 .. 24
  const uint32_t half_ulp = 1u << (shift - 1);
  const uint32_t rest = mantissa & ((1u << shift) - 1);
  uint32_t result = mantissa >> shift;
  if (rest > half_ulp || (rest == half_ulp && (result & 1u))) ++result;
  return sign | static_cast<uint16_t>(result);
}

}  // namespace ember::storage
