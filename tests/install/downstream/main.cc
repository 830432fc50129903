// A downstream program built against the installed Ember package. It pushes a
// few dependent ops on an engine it creates and on the process-wide engine,
// and checks what they computed. Exits non-zero on a wrong value or an error.

#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>

#include "engine/context.h"
#include "engine/engine.h"
#include "engine/engine_options.h"
#include "engine/error.h"

namespace {

namespace ee = ember::engine;

// Pushes a chain of ops on two vars a and b, whose data are `x` and `y`:
// each op reads or writes them only as declared, so the engine's ordering
// alone makes the result deterministic.
bool RunChain(ee::Engine& engine, const char* label) {
  ee::VarHandle a = engine.NewVariable();
  ee::VarHandle b = engine.NewVariable();
  int x = 0;
  int y = 0;
  engine.PushSync([&](ee::RunContext) { x = 3; }, {}, {a}, {.name = "set_a"});
  engine.PushSync([&](ee::RunContext) { y = 2 * x; }, {a}, {b}, {.name = "b_from_a"});
  // Writes a, so it must wait for the read above: y stays 6 whatever the timing.
  engine.PushSync([&](ee::RunContext) { x += 1; }, {}, {a}, {.name = "inc_a"});
  engine.PushSync([&](ee::RunContext) { y += x; }, {a}, {b}, {.name = "add_a_to_b"});
  engine.WaitForAll();

  bool ok = true;
  if (x != 4 || y != 10) {
    std::fprintf(stderr, "[%s] wrong values: x=%d (want 4), y=%d (want 10)\n", label, x, y);
    ok = false;
  }
  const uint64_t version_a = engine.VarVersion(a);
  const uint64_t version_b = engine.VarVersion(b);
  if (version_a != 2 || version_b != 2) {
    std::fprintf(stderr, "[%s] wrong var versions: a=%llu, b=%llu (want 2 each)\n", label,
                 static_cast<unsigned long long>(version_a),
                 static_cast<unsigned long long>(version_b));
    ok = false;
  }
  engine.DeleteVariable(a);
  engine.DeleteVariable(b);
  engine.WaitForAll();
  std::printf("[%s] %s: x=%d y=%d\n", label, ok ? "ok" : "FAILED", x, y);
  return ok;
}

// The error types are part of the package: an unknown engine name raises
// ember::InvalidArgument.
bool UnknownEngineIsInvalidArgument() {
  try {
    ee::ParseEngineType("NoSuchEngine");
  } catch (const ember::InvalidArgument& e) {
    std::printf("[errors] ok: %s\n", e.what());
    return true;
  }
  std::fprintf(stderr, "[errors] ParseEngineType(\"NoSuchEngine\") did not throw\n");
  return false;
}

}  // namespace

int main() {
  try {
    bool ok = true;
    {
      std::unique_ptr<ee::Engine> engine = ee::CreateEngine(ee::EngineOptions{});
      ok &= RunChain(*engine, std::string(engine->name()).c_str());
    }
    ok &= RunChain(ee::Engine::Get(), "Engine::Get");
    ok &= UnknownEngineIsInvalidArgument();
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
