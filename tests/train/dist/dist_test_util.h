#pragma once

// What the several-GPU tests share: the message of an expected error,
// ranks run as threads, and a shell command's output.

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>

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

// Runs `command` in a shell: its stdout and stderr, and its exit status
// (-1 when it did not exit).
inline std::pair<std::string, int> Shell(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return {"popen failed", -1};
  std::array<char, 512> buffer;
  while (std::fgets(buffer.data(), buffer.size(), pipe) != nullptr) out += buffer.data();
  const int status = ::pclose(pipe);
  return {out, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

}  // namespace ember::train::testing
