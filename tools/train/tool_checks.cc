#include "tools/train/tool_checks.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "engine/base/logging.h"
#include "engine/engine_options.h"
#include "engine/error.h"

namespace ember::tools {

namespace fs = std::filesystem;

void CheckWritableFile(std::string_view what, const std::string& path) {
  if (path.empty()) return;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    throw InvalidArgument(fmt::format("{} '{}': is a directory; expected a file", what, path));
  }
  const bool existed = fs::exists(path, ec);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw InvalidArgument(
        fmt::format("{} '{}': cannot be written: {}", what, path, std::strerror(errno)));
  }
  ::close(fd);
  if (!existed) ::unlink(path.c_str());
}

void CheckWritableDir(std::string_view what, const std::string& dir) {
  if (dir.empty()) return;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    throw InvalidArgument(fmt::format("{} '{}': cannot be created: {}", what, dir, ec.message()));
  }
  if (!fs::is_directory(dir, ec)) {
    throw InvalidArgument(fmt::format("{} '{}': is not a directory", what, dir));
  }
  const std::string probe = (fs::path(dir) / fmt::format(".ember-probe-{}", ::getpid())).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw InvalidArgument(
        fmt::format("{} '{}': cannot write in it: {}", what, dir, std::strerror(errno)));
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

void CheckEnvironment() {
  CheckLogLevelFromEnv();
  (void)engine::EngineOptions::FromEnv();
  if (const char* profile = std::getenv("ENGINE_PROFILE"); profile != nullptr && *profile != 0) {
    CheckWritableFile("ENGINE_PROFILE", profile);
  }
}

}  // namespace ember::tools
