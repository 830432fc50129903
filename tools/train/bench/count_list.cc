#include "tools/train/bench/count_list.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "engine/error.h"

namespace ember::train {

std::vector<int64_t> ParseCountList(std::string_view flag, std::string_view text) {
  std::vector<int64_t> values;
  for (std::size_t at = 0; at <= text.size();) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const std::string part(text.substr(at, comma - at));
    char* end = nullptr;
    values.push_back(std::strtoll(part.c_str(), &end, 10));
    if (part.empty() || *end != 0 || values.back() < 1) {
      throw InvalidArgument(fmt::format("--{}='{}' is not a list of positive counts", flag, text));
    }
    at = comma + 1;
  }
  return values;
}

}  // namespace ember::train
