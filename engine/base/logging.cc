#include "engine/base/logging.h"

#include <array>
#include <cstdlib>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include "engine/error.h"

namespace ember {
namespace {

constexpr std::array<std::string_view, 7> kLevels = {"trace", "debug",    "info", "warn",
                                                     "error", "critical", "off"};

// The environment's level, or null when unset or empty.
const char* LevelFromEnv() {
  const char* level = std::getenv("EMBER_LOG_LEVEL");
  return level != nullptr && *level != '\0' ? level : nullptr;
}

}  // namespace

spdlog::level::level_enum ParseLogLevel(std::string_view name) {
  for (std::size_t i = 0; i < kLevels.size(); ++i) {
    if (name == kLevels[i]) return static_cast<spdlog::level::level_enum>(i);
  }
  throw InvalidArgument(fmt::format("[ParseLogLevel] unknown log level '{}'; valid: {}", name,
                                    fmt::join(kLevels, ", ")));
}

void CheckLogLevelFromEnv() {
  if (const char* level = LevelFromEnv()) {
    try {
      (void)ParseLogLevel(level);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(fmt::format("EMBER_LOG_LEVEL: {}", e.what()));
    }
  }
}

spdlog::logger& Log() {
  // Leaked on purpose: engines may log from their destructors at exit, after
  // function-local statics made later than the first engine are gone.
  static spdlog::logger* const logger = [] {
    auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    auto* made = new spdlog::logger("ember", std::move(sink));
    made->set_level(spdlog::level::warn);
    if (const char* level = LevelFromEnv()) {
      try {
        made->set_level(ParseLogLevel(level));
      } catch (const InvalidArgument& e) {
        made->warn("EMBER_LOG_LEVEL: {}; logging at warn", e.what());
      }
    }
    return made;
  }();
  return *logger;
}

}  // namespace ember
