#pragma once

// SizeClasses: the sizes a caching pool rounds requests to, so that freed
// blocks fit later requests of similar size (MXNet's two policies).
//   round: powers of two from the page size up to 2^cutoff, then multiples
//          of 2^cutoff (large blocks waste at most 2^cutoff - 1 bytes);
//   exact: multiples of the page size.
//
// Thread safety: immutable.

#include <cstddef>

namespace ember::storage::internal {

class SizeClasses {
 public:
  static SizeClasses Round(std::size_t page_size, int cutoff_log2);
  static SizeClasses Exact(std::size_t page_size);

  // The class `bytes` (> 0) falls in. Throws OutOfMemory when rounding would
  // overflow.
  [[nodiscard]] std::size_t Round(std::size_t bytes) const;

 private:
  SizeClasses(std::size_t page, std::size_t cutoff) : page_(page), cutoff_(cutoff) {}
  std::size_t page_;
  std::size_t cutoff_;  // 0: exact
};

}  // namespace ember::storage::internal
