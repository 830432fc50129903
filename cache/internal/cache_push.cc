#include "cache/internal/cache_push.h"

#include <utility>

namespace ember::cache::internal {

void PushCacheOp(engine::Engine& engine, std::string_view name, engine::Context ctx,
                 engine::FnProperty prop, const StepVars& vars, StepBody body) {
  engine.PushAsync(
      [body = std::move(body)](engine::RunContext run, const engine::OnStart& on_start,
                               const engine::OnComplete& on_complete) {
        on_start();
        engine::DeferredCheck check = body(run.stream);
        if (check) {
          on_complete.WithCheck(std::move(check));
        } else {
          on_complete();
        }
      },
      vars.reads, vars.writes, {.ctx = ctx, .prop = prop, .name = name});
}

}  // namespace ember::cache::internal
