#pragma once

// ErrorOf: the message of the InvalidArgument that `fn` throws, or "no
// error", for tests that compare messages (what and where).

#include <string>

#include "engine/error.h"

namespace ember::train::testing {

inline std::string ErrorOf(const auto& fn) {
  try {
    fn();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace ember::train::testing
