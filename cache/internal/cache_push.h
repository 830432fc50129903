#pragma once

// PushCacheOp: how every step of the cache becomes an engine op. The step's
// body gets the op's stream (null on the CPU) and returns the check to run
// once its GPU work is done (a fault record its kernels wrote), or an empty
// check: the op then completes right after the launch (engine.h,
// OnComplete::WithCheck), so no worker waits for the GPU. On the CPU the
// body runs to completion and a throw is the op's error.
//
// Thread safety: thread-safe (an engine push).

#include <functional>
#include <string_view>
#include <vector>

#include "engine/engine.h"

namespace ember::cache::internal {

using StepBody = std::function<engine::DeferredCheck(void* stream)>;

struct StepVars {
  std::vector<engine::VarHandle> reads;
  std::vector<engine::VarHandle> writes;
};

// Pushes `body` as op `name` on `ctx` with property `prop`, reading and
// writing exactly `vars`.
void PushCacheOp(engine::Engine& engine, std::string_view name, engine::Context ctx,
                 engine::FnProperty prop, const StepVars& vars, StepBody body);

}  // namespace ember::cache::internal
