#pragma once

// RunForked: runs a piece of the bench in a child process made by fork(),
// so that it does not inherit the heap and threads that the runs before it
// left in the bench's own process (and leaves none behind). The child gets
// a copy of everything the parent had made (the DAG, its serial result)
// without making it again. For a run that must not inherit even that, see
// spawn_self.h.
//
// REQUIRES: no CUDA context in the process (a forked child cannot use it)
// and no threads of the caller's that the child would need.
//
// Thread safety: call from the bench's main thread.

#include <functional>
#include <string>

namespace ember::bench {

struct ForkedResult {
  int exit_status = 0;  // the child's exit status
  std::string output;   // what the child's body returned
};

// Runs `body` in a child; the child sends body's text back through a pipe
// and exits with its status (an exception in body: status 2, the message
// on stderr). Throws Error when the child cannot be made or dies of a
// signal.
ForkedResult RunForked(const std::function<int(std::string* output)>& body);

}  // namespace ember::bench
