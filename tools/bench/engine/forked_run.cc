#include "tools/bench/engine/forked_run.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <exception>

#include "absl/strings/str_format.h"
#include "engine/error.h"

namespace ember::bench {
namespace {

[[noreturn]] void RunChild(const std::function<int(std::string*)>& body, int fd) {
  std::string output;
  int status = 0;
  try {
    status = body(&output);
  } catch (const std::exception& e) {
    absl::FPrintF(stderr, "[ember-bench-engine] ERROR in a child run: %s\n", e.what());
    status = 2;
  }
  for (size_t done = 0; done < output.size();) {
    const ssize_t n = write(fd, output.data() + done, output.size() - done);
    if (n <= 0) _exit(2);
    done += static_cast<size_t>(n);
  }
  std::fflush(stderr);
  // _exit: the parent's atexit handlers and static destructors are the
  // parent's business.
  _exit(status);
}

}  // namespace

ForkedResult RunForked(const std::function<int(std::string* output)>& body) {
  int fds[2];
  if (pipe(fds) != 0) throw Error("[ember-bench-engine] pipe() failed");
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) throw Error("[ember-bench-engine] fork() failed");
  if (pid == 0) {
    close(fds[0]);
    RunChild(body, fds[1]);
  }
  close(fds[1]);
  ForkedResult result;
  char buffer[4096];
  for (ssize_t n; (n = read(fds[0], buffer, sizeof(buffer))) > 0;) result.output.append(buffer, n);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status)) {
    throw Error(absl::StrFormat("[ember-bench-engine] a child run died (wait status %d)", status));
  }
  result.exit_status = WEXITSTATUS(status);
  return result;
}

}  // namespace ember::bench
