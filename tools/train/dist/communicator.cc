#include "tools/train/dist/communicator.h"

#include <string>
#include <vector>

#include <fmt/format.h>

#include "engine/error.h"

namespace ember::train {
namespace {

// "bytes", or "elements of 8 bytes".
std::string Units(size_t unit) {
  return unit == 1 ? std::string("bytes") : fmt::format("elements of {} bytes", unit);
}

// What is wrong with `counts` for a buffer of `size` units, or "".
std::string CountsProblem(std::string_view name, std::span<const int64_t> counts, int world_size,
                          size_t size, size_t unit) {
  if (counts.size() != static_cast<size_t>(world_size)) {
    return fmt::format("{} has {} entries, not world_size {}", name, counts.size(), world_size);
  }
  // The sum is checked piece by piece against the size, so it cannot overflow.
  uint64_t sum = 0;
  for (size_t p = 0; p < counts.size(); ++p) {
    if (counts[p] < 0) return fmt::format("{}[{}] is {}", name, p, counts[p]);
    if (static_cast<uint64_t>(counts[p]) > size - sum) {
      return fmt::format("{} sum to more than the buffer's {} {}", name, size, Units(unit));
    }
    sum += static_cast<uint64_t>(counts[p]);
  }
  if (sum != size) {
    return fmt::format("{} sum to {} but the buffer has {} {}", name, sum, size, Units(unit));
  }
  return "";
}

std::vector<int64_t> ToBytes(std::span<const int64_t> counts, size_t unit) {
  std::vector<int64_t> bytes(counts.begin(), counts.end());
  for (int64_t& b : bytes) b *= static_cast<int64_t>(unit);
  return bytes;
}

}  // namespace

void Communicator::AllToAllV(std::span<const std::byte> send, std::span<const int64_t> send_bytes,
                             std::span<std::byte> recv, std::span<const int64_t> recv_bytes,
                             std::string_view what) {
  AllToAllVIn(send, send_bytes, recv, recv_bytes, 1, what);
}

void Communicator::AllToAllVIn(std::span<const std::byte> send,
                               std::span<const int64_t> send_counts, std::span<std::byte> recv,
                               std::span<const int64_t> recv_counts, size_t unit,
                               std::string_view what) {
  std::string problem =
      CountsProblem("send counts", send_counts, world_size_, send.size() / unit, unit);
  if (problem.empty()) {
    problem = CountsProblem("recv counts", recv_counts, world_size_, recv.size() / unit, unit);
  }
  if (!problem.empty()) Reject("AllToAllV", what, problem);
  if (unit == 1) return DoAllToAllV(send, send_counts, recv, recv_counts, what);
  // The sums matched the buffers' sizes, so no count in bytes overflows.
  DoAllToAllV(send, ToBytes(send_counts, unit), recv, ToBytes(recv_counts, unit), what);
}

void Communicator::AllToAllIn(std::span<const std::byte> send, std::span<std::byte> recv,
                              size_t unit, std::string_view what) {
  const size_t elements = send.size() / unit;
  if (elements % world_size_ != 0) {
    Reject("AllToAll", what,
           fmt::format("send has {} {}, not a multiple of world_size {}", elements, Units(unit),
                       world_size_));
  }
  if (recv.size() != send.size()) {
    Reject(
        "AllToAll", what,
        fmt::format("recv has {} {} but send has {}", recv.size() / unit, Units(unit), elements));
  }
  const std::vector<int64_t> bytes(world_size_, static_cast<int64_t>(send.size() / world_size_));
  DoAllToAllV(send, bytes, recv, bytes, what);
}

void Communicator::Reject(std::string_view kind, std::string_view what, std::string_view problem) {
  const std::string message =
      fmt::format("[Communicator::{}] rank {}: '{}': {}", kind, rank_, what, problem);
  Abort(message);
  throw InvalidArgument(message);
}

}  // namespace ember::train
