#include "tests/engine/engine_cases.h"

namespace ember::engine::testing {

std::vector<EngineCase> AllEngineCases() {
  std::vector<EngineCase> cases = {{EngineType::kNaive, 1}};
  for (EngineType type : {EngineType::kThreaded, EngineType::kThreadedPerDevice}) {
    for (int workers : {1, 2, 4}) cases.push_back({type, workers});
  }
  return cases;
}

std::vector<EngineCase> AsyncEngineCases() {
  return {{.type = EngineType::kNaive, .workers = 1, .async_gpu = true},
          {.type = EngineType::kThreaded, .workers = 2, .async_gpu = true},
          {.type = EngineType::kThreadedPerDevice, .workers = 2, .async_gpu = true}};
}

std::string CaseName(const ::testing::TestParamInfo<EngineCase>& info) {
  return std::string(ToString(info.param.type)) + (info.param.async_gpu ? "Async" : "") + "_" +
         std::to_string(info.param.workers);
}

EngineOptions OptionsFor(const EngineCase& c) {
  EngineOptions options;
  options.type = c.type;
  options.async_gpu = c.async_gpu;
  options.cpu_workers = c.workers;
  options.cpu_priority_workers = c.workers;
  options.pool_workers = c.workers;
  return options;
}

}  // namespace ember::engine::testing
