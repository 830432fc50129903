#pragma once

// Ember's logger ("ember"), an spdlog logger whose level comes from
// EMBER_LOG_LEVEL (trace, debug, info, warn, error, critical, off; default
// warn). Made on first use and never destroyed, so that engines torn down
// during static destruction can still log.

#include <spdlog/spdlog.h>

namespace ember::engine::internal {

spdlog::logger& Log();

}  // namespace ember::engine::internal
