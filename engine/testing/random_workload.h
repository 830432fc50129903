#pragma once

// A random workload in the manner of MXNet's engine test: ops over a set of
// vars, each reading a few vars and writing one, computing
//   data[write] = Mix(data[reads...], op id)
// so that any ordering mistake changes the final data. RunSerial gives the
// reference; RunOnEngine pushes the same ops on an engine. Shared by the
// tests, ember-stress and ember-bench-engine.
//
// With num_partitions > 1 the vars are split into disjoint groups (plus a
// group of read-only vars every op may read); op i touches only group
// i % num_partitions, so several threads may push the partitions
// concurrently and still match the serial result exactly.
//
// Thread safety: functions are reentrant; a Workload is immutable once made.

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/context.h"
#include "engine/engine.h"

namespace ember::engine::testing {

struct WorkloadSpec {
  int num_ops = 10000;
  int num_vars = 100;      // written-to vars, split among the partitions
  int num_const_vars = 0;  // read-only vars shared by all partitions
  int min_reads = 2;
  int max_reads = 19;
  int num_partitions = 1;
  double sleep_probability = 0.0;  // chance that an op sleeps
  int max_sleep_us = 0;            // its sleep, uniform in [0, max_sleep_us]
  bool random_properties = false;  // normal, CPU-prioritized, async, no-skip
  bool random_priorities = false;  // priority uniform in [-8, 8]
  uint64_t seed = 1;
};

struct WorkloadOp {
  uint32_t id = 0;
  int partition = 0;
  std::vector<int> reads;  // var indices; may repeat and may include `write`
  int write = 0;
  int sleep_us = 0;
  FnProperty prop = FnProperty::kNormal;
  int priority = 0;
};

struct Workload {
  int num_vars = 0;  // including the const vars, which come last
  std::vector<WorkloadOp> ops;
  std::vector<uint64_t> initial;  // initial data per var
};

[[nodiscard]] Workload MakeRandomWorkload(const WorkloadSpec& spec);

// The new value of op.write given the current data.
[[nodiscard]] uint64_t ApplyOp(const WorkloadOp& op, const std::vector<uint64_t>& data);

// The final data when the ops run one after another in push order.
[[nodiscard]] std::vector<uint64_t> RunSerial(const Workload& workload);

struct RunOptions {
  int push_threads = 1;  // REQUIRES: the workload has this many partitions
  // How ops are pushed, chosen per op at random (seeded): PushAsync, PushSync,
  // or a pre-built operator (NewOperator + Push). Async ops complete from a
  // helper thread when `foreign_completion` is set.
  bool mix_push_kinds = false;
  bool foreign_completion = false;
  // Called now and then from the pushing threads with the number of ops
  // pushed so far (for progress bars); may be empty.
  std::function<void(int64_t pushed)> progress;
};

// Pushes every op of `workload` on `engine` (vars made and deleted here),
// waits for all of them and returns the final data. Rethrows the first op
// error.
[[nodiscard]] std::vector<uint64_t> RunOnEngine(Engine& engine, const Workload& workload,
                                                const RunOptions& options = {});

}  // namespace ember::engine::testing
