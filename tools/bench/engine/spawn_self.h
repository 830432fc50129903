#pragma once

// SpawnSelf: runs this program again, from its executable
// (/proc/self/exe), in a fresh process. Unlike a forked child it inherits
// nothing of the parent's memory: no warmed heap, no threads, no caches the
// parent filled; only the environment and stderr. That is what a cold run
// needs (cold_run.h). The child's stdout comes back as text.
//
// Thread safety: call from the bench's main thread (the child inherits the
// file descriptors open at the time).

#include <string>
#include <vector>

namespace ember::bench {

struct SpawnResult {
  int exit_status = 0;  // the child's exit status
  std::string output;   // what the child wrote on stdout
};

// Runs /proc/self/exe with `args` (argv[1] on) and waits for it. Throws
// Error when it cannot be started or dies of a signal.
[[nodiscard]] SpawnResult SpawnSelf(const std::vector<std::string>& args);

}  // namespace ember::bench
