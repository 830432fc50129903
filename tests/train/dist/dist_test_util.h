#pragma once

// What the several-GPU tests share: the message of an expected error, and
// ranks run as threads.

#include <functional>
#include <string>

#include "engine/error.h"
#include "tools/train/dist/rank_threads.h"

namespace ember::train::testing {

// The message of the InvalidArgument that `fn` throws, or "no error".
inline std::string ErrorOf(const auto& fn) {
  try {
    fn();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "no error";
}

// Runs body(rank) on a thread per rank; once all have joined, rethrows the
// first failure in rank order.
inline void RunRankThreads(int ranks, const std::function<void(int)>& body) {
  RunOnRankThreads(ranks, body);
}

}  // namespace ember::train::testing
