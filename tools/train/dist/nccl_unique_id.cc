// NcclUniqueId's hex form (nccl_communicator.h): plain bytes, with or
// without NCCL.

#include <fmt/format.h>

#include "engine/error.h"
#include "tools/train/dist/nccl_communicator.h"

namespace ember::train {

std::string NcclUniqueId::ToHex() const {
  std::string hex;
  hex.reserve(2 * bytes.size());
  for (std::byte b : bytes) hex += fmt::format("{:02x}", static_cast<unsigned>(b));
  return hex;
}

NcclUniqueId NcclUniqueId::FromHex(std::string_view hex) {
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  NcclUniqueId id;
  bool ok = hex.size() == 2 * id.bytes.size();
  for (size_t i = 0; ok && i < id.bytes.size(); ++i) {
    const int hi = digit(hex[2 * i]);
    const int lo = digit(hex[2 * i + 1]);
    ok = hi >= 0 && lo >= 0;
    id.bytes[i] = static_cast<std::byte>(hi * 16 + lo);
  }
  if (!ok) {
    throw InvalidArgument(fmt::format(
        "[NcclUniqueId::FromHex] expected {} lowercase hex digits; got {} characters starting "
        "'{}'",
        2 * id.bytes.size(), hex.size(), hex.substr(0, 16)));
  }
  return id;
}

}  // namespace ember::train
