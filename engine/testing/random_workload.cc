#include "engine/testing/random_workload.h"

#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include <concurrentqueue/blockingconcurrentqueue.h>

namespace ember::engine::testing {
namespace {

uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

FnProperty RandomProperty(std::mt19937_64& rng) {
  constexpr FnProperty kProps[] = {FnProperty::kNormal, FnProperty::kCPUPrioritized,
                                   FnProperty::kAsync, FnProperty::kNoSkip};
  return kProps[rng() % 4];
}

// Vars of partition p are p, p + P, p + 2P, ... below num_vars; const vars
// follow at [num_vars, num_vars + num_const_vars).
int RandomVar(std::mt19937_64& rng, const WorkloadSpec& spec, int partition) {
  const int own = (spec.num_vars - partition + spec.num_partitions - 1) / spec.num_partitions;
  const int choices = own + spec.num_const_vars;
  const int pick = static_cast<int>(rng() % choices);
  return pick < own ? partition + pick * spec.num_partitions : spec.num_vars + (pick - own);
}

}  // namespace

Workload MakeRandomWorkload(const WorkloadSpec& spec) {
  std::mt19937_64 rng(spec.seed);
  Workload workload;
  workload.num_vars = spec.num_vars + spec.num_const_vars;
  for (int v = 0; v < workload.num_vars; ++v) workload.initial.push_back(SplitMix(v + spec.seed));
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  workload.ops.resize(spec.num_ops);
  for (int i = 0; i < spec.num_ops; ++i) {
    WorkloadOp& op = workload.ops[i];
    op.id = static_cast<uint32_t>(i);
    op.partition = i % spec.num_partitions;
    const int reads =
        spec.min_reads + static_cast<int>(rng() % (spec.max_reads - spec.min_reads + 1));
    for (int r = 0; r < reads; ++r) op.reads.push_back(RandomVar(rng, spec, op.partition));
    do {
      op.write = RandomVar(rng, spec, op.partition);
    } while (op.write >= spec.num_vars);
    if (spec.random_properties) op.prop = RandomProperty(rng);
    if (spec.random_priorities) op.priority = static_cast<int>(rng() % 17) - 8;
    // kAsync ops must not block, so they never sleep.
    if (op.prop != FnProperty::kAsync && coin(rng) < spec.sleep_probability) {
      op.sleep_us = static_cast<int>(rng() % (spec.max_sleep_us + 1));
    }
  }
  return workload;
}

uint64_t ApplyOp(const WorkloadOp& op, const std::vector<uint64_t>& data) {
  uint64_t acc = SplitMix(op.id);
  for (size_t k = 0; k < op.reads.size(); ++k) acc = SplitMix(acc ^ (data[op.reads[k]] + k));
  return acc;
}

std::vector<uint64_t> RunSerial(const Workload& workload) {
  std::vector<uint64_t> data = workload.initial;
  for (const WorkloadOp& op : workload.ops) data[op.write] = ApplyOp(op, data);
  return data;
}

namespace {

// Completes async ops from a thread of its own, as a real async op (a
// network read, a GPU callback) would.
class ForeignCompleter {
 public:
  ForeignCompleter() : thread_([this] { Loop(); }) {}
  ~ForeignCompleter() {
    queue_.enqueue(std::function<void()>());
    thread_.join();
  }
  void Post(std::function<void()> fn) { queue_.enqueue(std::move(fn)); }

 private:
  void Loop() {
    for (;;) {
      std::function<void()> fn;
      queue_.wait_dequeue(fn);
      if (!fn) return;
      fn();
    }
  }
  moodycamel::BlockingConcurrentQueue<std::function<void()>> queue_;
  std::thread thread_;
};

enum class PushKind { kAsync, kSync, kOperator };

class Runner {
 public:
  Runner(Engine& engine, const Workload& workload, const RunOptions& options)
      : engine_(engine), workload_(workload), options_(options), data_(workload.initial) {
    for (int v = 0; v < workload.num_vars; ++v) vars_.push_back(engine.NewVariable());
    if (options.foreign_completion) completer_ = std::make_unique<ForeignCompleter>();
  }

  std::vector<uint64_t> Run() {
    std::vector<std::thread> pushers;
    for (int t = 1; t < options_.push_threads; ++t)
      pushers.emplace_back([this, t] { PushPartition(t); });
    PushPartition(0);
    for (auto& pusher : pushers) pusher.join();
    engine_.WaitForAll();
    for (VarHandle var : vars_) engine_.DeleteVariable(var);
    engine_.WaitForAll();
    return data_;
  }

 private:
  void PushPartition(int partition) {
    std::mt19937_64 rng(1000 + partition);
    int64_t mine = 0;
    for (const WorkloadOp& op : workload_.ops) {
      if (op.partition % options_.push_threads != partition) continue;
      PushOne(op, options_.mix_push_kinds ? static_cast<PushKind>(rng() % 3) : PushKind::kAsync);
      if (options_.progress && (++mine & 0x3fff) == 0) {
        options_.progress(pushed_.fetch_add(0x4000) + 0x4000);
      }
    }
  }

  // Runs the op's body; returns nothing, writes data_[op.write].
  void Body(const WorkloadOp& op) {
    if (op.sleep_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(op.sleep_us));
    data_[op.write] = ApplyOp(op, data_);
  }

  void PushOne(const WorkloadOp& op, PushKind kind) {
    std::vector<VarHandle> reads;
    reads.reserve(op.reads.size());
    for (int r : op.reads) reads.push_back(vars_[r]);
    const OpAttrs attrs{Context::CPU(), op.prop, op.priority, "workload"};
    const VarHandle write = vars_[op.write];
    if (kind == PushKind::kSync && op.prop != FnProperty::kAsync) {
      engine_.PushSync([this, &op](RunContext) { Body(op); }, reads, {write}, attrs);
      return;
    }
    AsyncFn fn = [this, &op](RunContext, const OnStart& start, const OnComplete& complete) {
      start();
      Body(op);
      if (completer_) {
        completer_->Post([complete] { complete(); });
      } else {
        complete();
      }
    };
    if (kind == PushKind::kOperator) {
      OprHandle handle = engine_.NewOperator(std::move(fn), reads, {write}, attrs);
      engine_.Push(handle, attrs.ctx, attrs.priority);
      engine_.DeleteOperator(handle);
    } else {
      engine_.PushAsync(std::move(fn), reads, {write}, attrs);
    }
  }

  Engine& engine_;
  const Workload& workload_;
  const RunOptions& options_;
  std::vector<uint64_t> data_;
  std::vector<VarHandle> vars_;
  std::unique_ptr<ForeignCompleter> completer_;
  std::atomic<int64_t> pushed_{0};
};

}  // namespace

std::vector<uint64_t> RunOnEngine(Engine& engine, const Workload& workload,
                                  const RunOptions& options) {
  return Runner(engine, workload, options).Run();
}

}  // namespace ember::engine::testing
