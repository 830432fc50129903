#include "tools/bench/engine/engine_cases.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "tools/bench/common/process_usage.h"
#include "tools/bench/engine/dag_push.h"

namespace ember::bench {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void PushNoOps(engine::Engine& engine, int64_t ops, engine::VarList writes) {
  for (int64_t i = 0; i < ops; ++i) {
    engine.PushAsync([](engine::RunContext, const engine::OnStart&,
                        const engine::OnComplete& on_complete) { on_complete(); },
                     {}, writes);
  }
}

}  // namespace

double IndependentOpsPerSecond(engine::Engine& engine, int64_t ops) {
  const auto start = Clock::now();
  PushNoOps(engine, ops, {});
  engine.WaitForAll();
  return static_cast<double>(ops) / SecondsSince(start);
}

double ChainOpsPerSecond(engine::Engine& engine, int64_t ops) {
  const engine::VarHandle var = engine.NewVariable();
  const auto start = Clock::now();
  PushNoOps(engine, ops, {var});
  engine.WaitForAll();
  const double rate = static_cast<double>(ops) / SecondsSince(start);
  engine.DeleteVariable(var);
  return rate;
}

double DagOpsPerSecond(engine::Engine& engine, const engine::testing::Workload& workload,
                       std::vector<uint64_t>* data) {
  *data = workload.initial;
  const std::vector<engine::VarHandle> vars = NewVars(engine, workload.num_vars);
  const auto start = Clock::now();
  PushDag(engine, workload, vars, PushPath::kAsync, data);
  const double rate = static_cast<double>(workload.ops.size()) / SecondsSince(start);
  DeleteVars(engine, vars);
  return rate;
}

std::vector<double> PushToStartMicros(engine::Engine& engine, int samples, int gap_us) {
  std::vector<double> micros(samples);
  std::atomic<bool> started{false};
  Clock::time_point start_time;
  for (int i = 0; i < samples; ++i) {
    if (gap_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
    started.store(false, std::memory_order_relaxed);
    const auto push_time = Clock::now();
    engine.PushAsync(
        [&](engine::RunContext, const engine::OnStart&, const engine::OnComplete& on_complete) {
          start_time = Clock::now();
          started.store(true, std::memory_order_release);
          on_complete();
        },
        {}, {});
    // Spinning rather than WaitForAll keeps the waiting out of the engine.
    // After a while the spin yields: on a busy 2-core box a pure spin can
    // keep the very worker it waits for off the CPU.
    for (int spins = 0; !started.load(std::memory_order_acquire); ++spins) {
      if (spins > 10'000) std::this_thread::yield();
    }
    micros[i] = std::chrono::duration<double, std::micro>(start_time - push_time).count();
  }
  engine.WaitForAll();  // the last op may still be completing
  return micros;
}

// The settle lets workers finish their post-work spinning, which is the
// engine's choice while busy, not its idle cost.
double IdleCpuPercent(engine::Engine& engine, int64_t ops) {
  PushNoOps(engine, ops, {});
  engine.WaitForAll();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const ProcessUsage before = ProcessUsage::Now();
  const auto start = Clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const double cpu_s = (ProcessUsage::Now() - before).cpu_s();
  return 100 * cpu_s / SecondsSince(start);
}

}  // namespace ember::bench
