// Task queues: the priority pool runs the highest priority first and keeps
// push order among equal priorities; a spinning FIFO queue hands over ops
// pushed while it polls and after it went to sleep, and closes.

#include "engine/internal/task_queue.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/internal/mutex.h"
#include "engine/internal/opr_block.h"

namespace ember::engine {
namespace {

// User and system CPU time of this process so far.
double ProcessCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return double(t.tv_sec) + 1e-6 * double(t.tv_usec); };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

TEST(PriorityQueueTest, HighestPriorityFirstThenPushOrder) {
  auto queue = internal::MakePriorityQueue();
  auto* op = new internal::Operator(AsyncFn(), {}, OpAttrs{});
  std::vector<std::unique_ptr<internal::OprBlock, internal::OprBlock::Deleter>> blocks;
  const int priorities[] = {0, 5, -3, 5, 0, 9};
  for (int i = 0; i < 6; ++i) {
    op->Ref();
    blocks.emplace_back(internal::OprBlock::New(nullptr, op, Context::CPU(), priorities[i]));
    blocks.back()->seq = i;
    queue->Push(blocks.back().get());
  }
  std::vector<uint64_t> order;
  for (int i = 0; i < 6; ++i) order.push_back(queue->Pop()->seq);
  EXPECT_EQ(order, (std::vector<uint64_t>{5, 1, 3, 0, 4, 2}));
  queue->Close(1);
  EXPECT_EQ(queue->Pop(), nullptr);
  op->Unref();
}

TEST(FifoQueueTest, SpinningQueueDeliversWhilePollingAndAfterSleeping) {
  auto queue = internal::MakeFifoQueue(std::chrono::microseconds(2000));
  auto* op = new internal::Operator(AsyncFn(), {}, OpAttrs{});
  std::vector<std::unique_ptr<internal::OprBlock, internal::OprBlock::Deleter>> blocks;
  for (int i = 0; i < 3; ++i) {
    op->Ref();
    blocks.emplace_back(internal::OprBlock::New(nullptr, op, Context::CPU(), 0));
    blocks.back()->seq = i;
  }
  std::vector<uint64_t> got;
  std::thread consumer([&] {
    while (internal::OprBlock* block = queue->Pop()) got.push_back(block->seq);
  });
  queue->Push(blocks[0].get());  // taken while polling
  std::this_thread::sleep_for(std::chrono::microseconds(500));
  queue->Push(blocks[1].get());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the consumer sleeps now
  queue->Push(blocks[2].get());
  queue->Close(1);
  consumer.join();
  EXPECT_EQ(got, (std::vector<uint64_t>{0, 1, 2}));
  op->Unref();
}

// A spinning priority queue hands over ops pushed while it polls and after
// its consumer went to sleep, in priority order, and closes.
TEST(PriorityQueueTest, SpinningQueueDeliversWhilePollingAndAfterSleeping) {
  auto queue = internal::MakePriorityQueue(std::chrono::microseconds(2000));
  auto* op = new internal::Operator(AsyncFn(), {}, OpAttrs{});
  std::vector<std::unique_ptr<internal::OprBlock, internal::OprBlock::Deleter>> blocks;
  for (int i = 0; i < 3; ++i) {
    op->Ref();
    blocks.emplace_back(internal::OprBlock::New(nullptr, op, Context::CPU(), i));
    blocks.back()->seq = i;
  }
  std::vector<uint64_t> got;
  std::thread consumer([&] {
    while (internal::OprBlock* block = queue->Pop()) got.push_back(block->seq);
  });
  queue->Push(blocks[0].get());  // taken while polling
  std::this_thread::sleep_for(std::chrono::microseconds(500));
  queue->Push(blocks[1].get());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the consumer sleeps now
  queue->Push(blocks[2].get());
  queue->Close(1);
  consumer.join();
  EXPECT_EQ(got, (std::vector<uint64_t>{0, 1, 2}));
  op->Unref();
}

// Workers poll only for a bounded time after their last op: an engine that
// nothing is pushed to sleeps. A gross check (a spinning worker would take a
// whole core), not a measurement: ember-bench-engine measures idle use.
TEST(IdleEngineTest, IdleWorkersSleep) {
  for (EngineType type : {EngineType::kThreaded, EngineType::kThreadedPerDevice}) {
    EngineOptions options;
    options.type = type;
    auto engine = CreateEngine(options);
    for (int i = 0; i < 1000; ++i) engine->PushSync([](RunContext) {}, {}, {});
    engine->WaitForAll();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // past every spin window
    const double before = ProcessCpuSeconds();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const double used = ProcessCpuSeconds() - before;
    EXPECT_LT(used, 0.1) << ToString(type) << " used " << used << " s of CPU in 0.5 s idle";
  }
}

TEST(PriorityPoolTest, PrioritizedOpsRunHighestFirst) {
  EngineOptions options;
  options.cpu_priority_workers = 1;
  auto engine = CreateEngine(options);
  internal::Notification release;
  VarHandle gate = engine->NewVariable();
  // Occupy the single priority worker, then queue ops of mixed priorities.
  engine->PushSync([&](RunContext) { release.WaitForNotification(); }, {}, {gate},
                   {.prop = FnProperty::kCPUPrioritized, .priority = 100});
  std::vector<int> order;  // only the single priority worker appends
  for (int p : {1, 7, 3, 7, -2}) {
    VarHandle own = engine->NewVariable();
    engine->PushSync([&order, p](RunContext) { order.push_back(p); }, {}, {own},
                     {.prop = FnProperty::kCPUPrioritized, .priority = p});
  }
  release.Notify();
  engine->WaitForAll();
  EXPECT_EQ(order, (std::vector<int>{7, 7, 3, 1, -2}));
}

// A worker runs the op it makes ready next itself (a continuation), but a
// long chain yields to ops waiting in its queue (worker_pool.cc): with one
// worker, an op queued behind a 500-op chain runs within the chain's first
// run of continuations, not after it.
TEST(WorkerPoolTest, ContinuationChainYieldsToQueuedOps) {
  EngineOptions options;
  options.type = EngineType::kThreaded;
  options.pool_workers = 1;
  auto engine = CreateEngine(options);
  internal::Notification release;
  VarHandle chain = engine->NewVariable();
  engine->PushSync([&](RunContext) { release.WaitForNotification(); }, {}, {chain},
                   {.name = "gate"});
  std::vector<int> order;  // only the single worker appends
  constexpr int kChain = 500;
  for (int i = 0; i < kChain; ++i) {
    engine->PushSync([&order, i](RunContext) { order.push_back(i); }, {}, {chain});
  }
  VarHandle other = engine->NewVariable();
  engine->PushSync([&order](RunContext) { order.push_back(-1); }, {}, {other}, {.name = "queued"});
  release.Notify();
  engine->WaitForAll();
  ASSERT_EQ(order.size(), size_t{kChain} + 1);
  const auto queued = std::find(order.begin(), order.end(), -1) - order.begin();
  EXPECT_LE(queued, 65) << "the queued op waited for the whole chain";
  EXPECT_GE(queued, 1) << "the chain's first op is the gate's continuation";
}

}  // namespace
}  // namespace ember::engine
