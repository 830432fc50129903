// The one place where the engine reads the environment. Every variable here
// is listed with its default in docs/configuration.md.

#include "engine/engine_options.h"

#include <cstdlib>

#include <absl/strings/numbers.h>
#include <absl/strings/str_join.h>
#include <fmt/format.h>

#include "engine/error.h"

namespace ember::engine {
namespace {

constexpr std::string_view kAsyncSuffix = "Async";

// An integer variable in [min, max], or `fallback` when unset or empty.
int IntFromEnv(const char* name, int fallback, int min, int max) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  int value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < min || value > max) {
    throw InvalidArgument(fmt::format(
        "[EngineOptions::FromEnv] {}='{}' is not an integer in [{}, {}]", name, text, min, max));
  }
  return value;
}

}  // namespace

std::string_view ToString(EngineType type) {
  switch (type) {
    case EngineType::kNaive:
      return "NaiveEngine";
    case EngineType::kThreaded:
      return "ThreadedEngine";
    case EngineType::kThreadedPerDevice:
      return "ThreadedEnginePerDevice";
  }
  return "UnknownEngine";
}

std::vector<std::string> EngineTypeNames() {
  std::vector<std::string> names;
  for (EngineType type :
       {EngineType::kNaive, EngineType::kThreaded, EngineType::kThreadedPerDevice}) {
    names.emplace_back(ToString(type));
    names.push_back(fmt::format("{}{}", ToString(type), kAsyncSuffix));
  }
  return names;
}

EngineOptions ParseEngineType(std::string_view name, EngineOptions base) {
  std::string_view stem = name;
  base.async_gpu = stem.ends_with(kAsyncSuffix);
  if (base.async_gpu) stem.remove_suffix(kAsyncSuffix.size());
  for (EngineType type :
       {EngineType::kNaive, EngineType::kThreaded, EngineType::kThreadedPerDevice}) {
    if (stem == ToString(type)) {
      base.type = type;
      return base;
    }
  }
  throw InvalidArgument(fmt::format("[ParseEngineType] unknown engine type '{}'; valid names: {}",
                                    name, absl::StrJoin(EngineTypeNames(), ", ")));
}

EngineOptions EngineOptions::FromEnv() {
  EngineOptions options;
  constexpr int kMaxThreads = 1024;
  const struct {
    const char* name;
    int* field;
    int min;
    int max;
  } knobs[] = {
      {"EMBER_CPU_WORKER_NTHREADS", &options.cpu_workers, 1, kMaxThreads},
      {"EMBER_CPU_PRIORITY_NTHREADS", &options.cpu_priority_workers, 1, kMaxThreads},
      {"EMBER_NUM_WORKER_THREADS", &options.pool_workers, 1, kMaxThreads},
      {"EMBER_GPU_WORKER_NTHREADS", &options.gpu_workers, 1, kMaxThreads},
      {"EMBER_GPU_COPY_NTHREADS", &options.gpu_copy_workers, 1, kMaxThreads},
      {"EMBER_GPU_PRIORITY_NTHREADS", &options.gpu_priority_workers, 1, kMaxThreads},
      {"EMBER_GPU_EVENT_POOL_SIZE", &options.gpu_event_pool_size, 1, 1 << 20},
      {"EMBER_GPU_WORKER_SPIN_US", &options.gpu_worker_spin_us, 0, 1 << 20},
      {"EMBER_CPU_WORKER_SPIN_US", &options.cpu_worker_spin_us, 0, 1 << 20},
      {"EMBER_ENGINE_MAX_INFLIGHT", &options.max_in_flight, 1, 1 << 30},
      {"EMBER_ENGINE_PACE_INFLIGHT", &options.pace_in_flight, 0, 1 << 30},
      {"EMBER_ENGINE_BULK_SIZE", &options.bulk_size, 0, 1 << 20},
  };
  for (const auto& knob : knobs)
    *knob.field = IntFromEnv(knob.name, *knob.field, knob.min, knob.max);
  options.gpu_stream_priorities =
      IntFromEnv("EMBER_GPU_STREAM_PRIORITIES", options.gpu_stream_priorities ? 1 : 0, 0, 1) != 0;
  if (const char* path = std::getenv("ENGINE_PROFILE")) options.profile_path = path;
  // MXNet's name for the variable is honoured too, so that a ported
  // program's settings keep their meaning; Ember's own wins when both are set.
  for (const char* variable : {"ENGINE_TYPE", "MXNET_ENGINE_TYPE"}) {
    const char* type = std::getenv(variable);
    if (type == nullptr || *type == '\0') continue;
    try {
      return ParseEngineType(type, options);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(fmt::format("[EngineOptions::FromEnv] {}: {}", variable, e.what()));
    }
  }
  return options;
}

}  // namespace ember::engine
