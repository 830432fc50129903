#pragma once

// DType: the element types a Tensor holds, and the C++ types that stand for
// them. f16 and bf16 have no arithmetic type in C++20: Float16 and BFloat16
// are their raw bit patterns, for storage and copies only (kernels do the
// math).
//
// Thread safety: plain values.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ember::storage {

enum class DType : uint8_t { kF32, kF16, kBF16, kI32, kI64 };

struct Float16 {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

// Bytes per element.
std::size_t SizeOf(DType dtype);
// "f32", "f16", "bf16", "i32", "i64".
std::string_view ToString(DType dtype);

// kDTypeOf<T>: the DType a pointer to T reads, e.g. for Tensor::data<T>().
// Only defined for the five element types: another T fails to compile.
template <typename T>
inline constexpr DType kDTypeOf = [] {
  static_assert(sizeof(T) == 0, "not an element type of ember::storage::DType");
  return DType::kF32;
}();
template <>
inline constexpr DType kDTypeOf<float> = DType::kF32;
template <>
inline constexpr DType kDTypeOf<Float16> = DType::kF16;
template <>
inline constexpr DType kDTypeOf<BFloat16> = DType::kBF16;
template <>
inline constexpr DType kDTypeOf<int32_t> = DType::kI32;
template <>
inline constexpr DType kDTypeOf<int64_t> = DType::kI64;

}  // namespace ember::storage
