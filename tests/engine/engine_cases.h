#pragma once

// Parameters shared by the engine contract tests: every engine type with
// several worker counts (Taskflow's Topic.Case.Nthreads), the Async engines
// once each, and a fixture that makes a fresh engine per test.

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/engine.h"

namespace ember::engine::testing {

struct EngineCase {
  EngineType type;
  int workers;
  bool async_gpu = false;  // the "...Async" engine of `type`
};

// NaiveEngine once; the threaded engines with 1, 2 and 4 workers per pool.
std::vector<EngineCase> AllEngineCases();

// The three Async engines, the threaded ones with 2 workers a pool. Their
// CPU ops take the plain engines' paths, and where there is a GPU their
// waits also follow CUDA events: the contract suites (waits, errors,
// misuse, dependencies) run on them too, the others on AllEngineCases.
std::vector<EngineCase> AsyncEngineCases();

// "ThreadedEnginePerDevice_2", "ThreadedEnginePerDeviceAsync_2".
std::string CaseName(const ::testing::TestParamInfo<EngineCase>& info);

EngineOptions OptionsFor(const EngineCase& c);

class EngineTest : public ::testing::TestWithParam<EngineCase> {
 protected:
  void SetUp() override { engine_ = CreateEngine(OptionsFor(GetParam())); }
  Engine& engine() { return *engine_; }
  bool is_naive() const { return GetParam().type == EngineType::kNaive; }

  std::unique_ptr<Engine> engine_;
};

}  // namespace ember::engine::testing
