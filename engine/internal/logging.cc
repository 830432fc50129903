#include "engine/internal/logging.h"

#include <cstdlib>
#include <memory>
#include <string>

#include <spdlog/sinks/stdout_color_sinks.h>

namespace ember::engine::internal {

spdlog::logger& Log() {
  // Leaked on purpose: engines may log from their destructors at exit, after
  // function-local statics made later than the first engine are gone.
  static spdlog::logger* const logger = [] {
    auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    auto* made = new spdlog::logger("ember", std::move(sink));
    const char* level = std::getenv("EMBER_LOG_LEVEL");
    made->set_level(level ? spdlog::level::from_str(level) : spdlog::level::warn);
    return made;
  }();
  return *logger;
}

}  // namespace ember::engine::internal
