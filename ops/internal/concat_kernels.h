#pragma once

// The column concatenation kernels behind concat.h, on one argument struct:
// one copy between a whole [rows, width] and its parts [rows, width_k],
// in either direction. The CPU kernel runs to completion; the CUDA kernel
// launches on `stream` (a cudaStream_t) and returns; a build without CUDA
// links a stub that throws Unavailable.
//
// Thread safety: reentrant (each call works on its own arguments).

#include <cstdint>
#include <string_view>

namespace ember::ops::internal {

// concat.h's kMaxConcatParts (asserted equal in concat.cc): repeated here
// because nvcc compiles this header as C++17, without the public headers.
inline constexpr int kMaxParts = 4;

enum class ConcatDirection : uint8_t {
  kToWhole,    // ConcatColumns: parts -> whole
  kFromWhole,  // SplitColumns: whole -> parts
};

// Passed by value to the CUDA kernel, so the part arrays are fixed-size.
struct ConcatArgs {
  ConcatDirection direction = ConcatDirection::kToWhole;
  int64_t rows = 0;   // B
  int64_t width = 0;  // the whole's columns: the sum of the parts' widths
  int num_parts = 0;
  int64_t part_width[kMaxParts] = {};
  int64_t part_offset[kMaxParts] = {};  // the part's first column in the whole
  // kToWhole reads parts and writes whole; kFromWhole the other way round.
  float* part[kMaxParts] = {};
  float* whole = nullptr;
};

void ConcatCpu(const ConcatArgs& args);
// `op` names the pushed op in CUDA errors.
void ConcatCuda(const ConcatArgs& args, void* stream, std::string_view op);

}  // namespace ember::ops::internal
