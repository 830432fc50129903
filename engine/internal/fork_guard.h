#pragma once

// ForkGeneration: a counter bumped in the child of every fork(). An engine
// remembers the generation it was made in; in a child its worker threads do
// not exist, so it refuses use with a clear error instead of hanging.

#include <cstdint>

namespace ember::engine::internal {

// The current generation; registers the fork handler on first call.
uint64_t ForkGeneration();

}  // namespace ember::engine::internal
