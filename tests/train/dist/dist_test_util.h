#pragma once

// What the several-GPU tests share: the message of an expected error, and
// ranks run as threads.

#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "engine/error.h"

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
  std::vector<std::exception_ptr> errors(ranks);
  std::vector<std::thread> threads;
  threads.reserve(ranks);
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace ember::train::testing
