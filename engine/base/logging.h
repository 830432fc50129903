#pragma once

// Log: Ember's logger ("ember"), an spdlog logger for every layer. Its level
// comes from EMBER_LOG_LEVEL: trace, debug, info, warn, error, critical or
// off (default warn). It is made on first use and never destroyed, so that
// engines torn down during static destruction can still log.
//
// An unknown EMBER_LOG_LEVEL is never silently taken: the logger says so
// (and uses warn), and CheckLogLevelFromEnv, which tools call before any
// work, throws InvalidArgument naming the value and the valid ones.
//
// Thread safety: thread-safe (spdlog's multi-threaded sink).

#include <string_view>

#include <spdlog/spdlog.h>

namespace ember {

spdlog::logger& Log();

// The level named `name`; throws InvalidArgument naming `name` and the
// valid levels.
spdlog::level::level_enum ParseLogLevel(std::string_view name);

// Throws InvalidArgument when EMBER_LOG_LEVEL is set to an unknown level.
void CheckLogLevelFromEnv();

}  // namespace ember
