#include "tools/bench/engine/spawn_self.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/error.h"

extern char** environ;

namespace ember::bench {
namespace {

constexpr char kSelf[] = "/proc/self/exe";

// The executable's own path, for the child's argv[0] (what ps shows).
std::string SelfPath() {
  char path[4096];
  const ssize_t n = readlink(kSelf, path, sizeof(path) - 1);
  return n > 0 ? std::string(path, n) : std::string(kSelf);
}

// Closes the descriptors of a pipe when the spawn ends, however it ends.
class Pipe {
 public:
  Pipe() {
    if (pipe2(fds_, O_CLOEXEC) != 0) {
      throw Error(absl::StrCat("[ember-bench-engine] pipe2: ", std::strerror(errno)));
    }
  }
  ~Pipe() {
    CloseRead();
    CloseWrite();
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;

  [[nodiscard]] int read_end() const { return fds_[0]; }
  [[nodiscard]] int write_end() const { return fds_[1]; }
  void CloseRead() { Close(&fds_[0]); }
  void CloseWrite() { Close(&fds_[1]); }

 private:
  static void Close(int* fd) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
  int fds_[2] = {-1, -1};
};

}  // namespace

SpawnResult SpawnSelf(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  std::string program = SelfPath();
  argv.push_back(program.data());
  std::vector<std::string> copies = args;  // argv wants char*, not const char*
  for (std::string& arg : copies) argv.push_back(arg.data());
  argv.push_back(nullptr);

  Pipe out;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // dup2 clears O_CLOEXEC on the copy: the child keeps only its stdout.
  posix_spawn_file_actions_adddup2(&actions, out.write_end(), STDOUT_FILENO);
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = -1;
  const int error = posix_spawn(&pid, kSelf, &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) {
    throw Error(
        absl::StrCat("[ember-bench-engine] posix_spawn ", kSelf, ": ", std::strerror(error)));
  }
  out.CloseWrite();
  SpawnResult result;
  char buffer[4096];
  for (ssize_t n; (n = read(out.read_end(), buffer, sizeof(buffer))) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    result.output.append(buffer, n);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status)) {
    throw Error(absl::StrFormat("[ember-bench-engine] the child %s %s died (wait status %d)", kSelf,
                                args.empty() ? "" : args.front(), status));
  }
  result.exit_status = WEXITSTATUS(status);
  return result;
}

}  // namespace ember::bench
