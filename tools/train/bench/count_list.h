#pragma once

// ParseCountList: a flag's comma-separated counts ("512,256"), for the
// training benches' list flags.
//
// Thread safety: a pure function.

#include <cstdint>
#include <string_view>
#include <vector>

namespace ember::train {

// Throws InvalidArgument "--<flag>='<text>' is not a list of positive
// counts" for an empty part, a part that is not a number, or one below 1.
std::vector<int64_t> ParseCountList(std::string_view flag, std::string_view text);

}  // namespace ember::train
