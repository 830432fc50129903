// The TBE ops' GPU validation, which never stalls a worker (embedding_bag.h,
// "Validation"), and the tables' GPU copy, made once per GPU: on every
// engine type, a bad batch's error (the CPU's, word for word) reaches
// WaitForVar on the output, a CPU op reading it (skipped, the error passed
// on) and WaitForAll, and a backward on a bad batch changes nothing; on the
// Async engines, a chain of forward and backward steps with validation on
// runs while the GPU is held (no op waits for it) and ends with the weights
// it gives without validation, bit for bit, and close to the CPU's; the
// tables are uploaded once per TbeTables and GPU and released with it.
// Skips without a GPU.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime_api.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/cuda/check.h"
#include "engine/error.h"
#include "ops/embedding_bag.h"
#include "storage/storage.h"
#include "tests/ops/embedding_bag_backward_test_util.h"
#include "tests/ops/embedding_bag_problem.h"
#include "tests/ops/op_test_util.h"

namespace ember::ops::testing {
namespace {

using engine::Context;
using ::testing::HasSubstr;

const Context kGpu = Context::GPU(0);
const Context kCpu = Context::CPU();

// The message of the InvalidArgument `call` throws ("" and a failure if none).
std::string ErrorOf(const std::function<void()>& call) {
  try {
    call();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InvalidArgument";
  return {};
}

// Whether `done()` holds within `limit`, polling.
bool Eventually(const std::function<bool()>& done, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// Holds a GPU stream: Close pushes a GPU op, writing a tensor, whose stream
// runs a host function that returns only once the gate opens (or after 60 s,
// so that a failing test cannot hold the GPU for good). GPU ops ordered
// after it cannot start before it opens, so whatever the engine completes
// meanwhile completed without waiting for the GPU. For the Async engines
// only: the plain ones sync the gate's stream when it completes.
class StreamGate {
 public:
  StreamGate() = default;
  StreamGate(const StreamGate&) = delete;
  StreamGate& operator=(const StreamGate&) = delete;
  ~StreamGate() { Open(); }

  void Close(engine::Engine& engine, const Tensor& tensor) {
    engine.PushAsync(
        [state = state_](engine::RunContext rc, const engine::OnStart& on_start,
                         const engine::OnComplete& on_complete) {
          on_start();
          // The host function owns a reference to the state: the gate may go first.
          auto* held = new std::shared_ptr<State>(state);
          const cudaError_t status =
              cudaLaunchHostFunc(static_cast<cudaStream_t>(rc.stream), &WaitUntilOpen, held);
          if (status != cudaSuccess) delete held;
          CudaCheck(status, "cudaLaunchHostFunc (test gate)");
          on_complete();
        },
        {}, {tensor.var()}, {.ctx = tensor.ctx(), .name = "gate"});
  }

  void Open() {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->open = true;
    state_->cv.notify_all();
  }

  // False once the host function has returned: opened, or timed out.
  [[nodiscard]] bool holding() const {
    std::lock_guard<std::mutex> lock(state_->mu);
    return !state_->returned;
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool open = false;
    bool returned = false;
  };

  static void CUDART_CB WaitUntilOpen(void* arg) {
    const std::unique_ptr<std::shared_ptr<State>> held(static_cast<std::shared_ptr<State>*>(arg));
    State& state = **held;
    std::unique_lock<std::mutex> lock(state.mu);
    state.cv.wait_for(lock, std::chrono::seconds(60), [&] { return state.open; });
    state.returned = true;
  }

  std::shared_ptr<State> state_ = std::make_shared<State>();
};

class EmbeddingBagValidationCudaTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
    engine_ = MakeEngine(GetParam());
  }

  [[nodiscard]] bool IsAsync() const { return GetParam().ends_with("Async"); }

  // The error of the forward of `p` on the CPU: what the GPU must report.
  std::string CpuForwardError(const TbeProblem& p, DType index_dtype) {
    return ErrorOf([&] { RunTbeForward(*engine_, p, kCpu, index_dtype, {}); });
  }

  std::unique_ptr<engine::Engine> engine_;
};

TEST_P(EmbeddingBagValidationCudaTest, BadBatchReachesWaitForVarOnTheOutput) {
  for (const BadBatch& bad : BadBatches()) {
    TbeProblem p = SmallTbeProblem(5);
    bad.corrupt(p);
    for (DType index_dtype : {DType::kI32, DType::kI64}) {
      const std::string expected = CpuForwardError(p, index_dtype);
      ASSERT_THAT(expected, HasSubstr("[EmbeddingBagForward] table ")) << bad.name;
      TbeTensors t = MakeTbeTensors(*engine_, p, kGpu, index_dtype);
      EmbeddingBagForward(p.tables(), t.weights, t.batch(p.batch_size), t.out);
      EXPECT_EQ(ErrorOf([&] { engine_->WaitForVar(t.out.var()); }), expected) << bad.name;
      // Reported once: nothing is left for WaitForAll.
      EXPECT_NO_THROW(engine_->WaitForAll()) << bad.name;
    }
  }
  // The engine goes on: a good batch runs as on the CPU.
  const TbeProblem good = SmallTbeProblem(5);
  const std::vector<float> cpu = RunTbeForward(*engine_, good, kCpu, DType::kI64, {});
  ExpectClose(RunTbeForward(*engine_, good, kGpu, DType::kI64, {}),
              std::vector<double>(cpu.begin(), cpu.end()), 1e-5, 2e-5, "a good batch after");
}

TEST_P(EmbeddingBagValidationCudaTest, BadBatchReachesACpuOpReadingTheOutput) {
  TbeProblem p = SmallTbeProblem(5);
  p.indices[23] = 33;
  const std::string expected = CpuForwardError(p, DType::kI64);
  EXPECT_THAT(expected, HasSubstr("table 2, bag 3: index 33 is out of range [0, 33)"));
  TbeTensors t = MakeTbeTensors(*engine_, p, kGpu, DType::kI64);
  EmbeddingBagForward(p.tables(), t.weights, t.batch(p.batch_size), t.out);
  bool ran = false;
  const engine::VarHandle after = engine_->NewVariable();
  engine_->PushSync([&](engine::RunContext) { ran = true; }, {t.out.var()}, {after},
                    {.name = "reads out"});
  EXPECT_EQ(ErrorOf([&] { engine_->WaitForVar(after); }), expected);
  EXPECT_FALSE(ran) << "a CPU op reading a failed output must be skipped";
  engine_->DeleteVariable(after);
}

// A bad backward, waited for by WaitForAll alone, leaves weights and
// optimizer state as they were (as the CPU does).
TEST_P(EmbeddingBagValidationCudaTest, BadBackwardReachesWaitForAllAndChangesNothing) {
  TbeProblem p = SmallTbeProblem(5);
  p.offsets[6] = 15;
  const TbeTables tables = p.tables();
  const HostBatch host{.indices = p.indices,
                       .offsets = p.offsets,
                       .per_sample_weights = {},
                       .batch_size = p.batch_size};
  std::mt19937_64 rng(3);
  const std::vector<float> initial = RandomFloats(rng, tables.total_elements(), -0.5f, 0.5f);
  const std::vector<float> grads = DyadicGrads(rng, p.batch_size * tables.total_dim());
  for (Optimizer optimizer : {Optimizer::kSgd, Optimizer::kRowwiseAdagrad, Optimizer::kAdam}) {
    std::string message[2];
    for (const Context ctx : {kCpu, kGpu}) {
      TbeState state(*engine_, tables, optimizer, initial, DType::kF32, ctx);
      const BatchTensors batch(*engine_, host, ctx, DType::kI64);
      const Tensor grad_output =
          FromHost(*engine_, grads, {p.batch_size, tables.total_dim()}, ctx, DType::kF32);
      PushStep(optimizer, tables, state, batch.view(), grad_output, 1, {});
      message[ctx.is_gpu()] = ErrorOf([&] { engine_->WaitForAll(); });
      EXPECT_EQ(ToHost<float>(state.weights), initial) << OptimizerName(optimizer);
      if (state.accumulator) {
        EXPECT_EQ(ToHost<float>(state.accumulator), std::vector<float>(tables.total_rows()));
      }
      if (state.m) {
        EXPECT_EQ(ToHost<float>(state.m), std::vector<float>(tables.total_elements()));
        EXPECT_EQ(ToHost<float>(state.v), std::vector<float>(tables.total_elements()));
      }
    }
    EXPECT_THAT(message[0], HasSubstr("] table 1, bag 2: offsets[7] is 14, below offsets[6] = 15"));
    EXPECT_EQ(message[1], message[0]) << OptimizerName(optimizer);
  }
}

// A forward and backward (SGD) chain over random batches with hot rows,
// dyadic gradients and per-sample weights (so the GPU's sums are exact).
struct Chain {
  TbeTables tables{{300, 40, 9}, {128, 64, 32}};
  std::vector<float> initial;
  std::vector<HostBatch> batches;
  std::vector<std::vector<float>> grads;
  SgdOptions sgd{.learning_rate = 0.02f};
};

Chain RandomChain(int steps) {
  std::mt19937_64 rng(4242);
  Chain chain;
  chain.initial = RandomFloats(rng, chain.tables.total_elements(), -0.5f, 0.5f);
  for (int s = 0; s < steps; ++s) {
    chain.batches.push_back(RandomBatch(rng, chain.tables, 64, 12, /*weighted=*/true));
    MakeWeightsDyadic(chain.batches.back(), rng);
    chain.grads.push_back(DyadicGrads(rng, 64 * chain.tables.total_dim()));
  }
  return chain;
}

struct ChainResult {
  std::vector<float> weights;
  std::vector<float> out;  // the last step's
  bool ran_while_held = false;
};

// Runs `chain` on `ctx`; with `gate`, pushes every step behind a closed
// gate and notes whether all of them completed while it held the GPU.
ChainResult RunChain(engine::Engine& engine, const Chain& chain, Context ctx, bool validate,
                     StreamGate* gate) {
  const TbeTables& tables = chain.tables;
  TbeState state(engine, tables, Optimizer::kSgd, chain.initial, DType::kF32, ctx);
  std::vector<BatchTensors> batches;
  std::vector<Tensor> grads;
  for (std::size_t s = 0; s < chain.batches.size(); ++s) {
    batches.emplace_back(engine, chain.batches[s], ctx, DType::kI32);
    grads.push_back(FromHost(engine, chain.grads[s], {64, tables.total_dim()}, ctx, DType::kF32));
  }
  Tensor out = Tensor::Empty(engine, {64, tables.total_dim()}, DType::kF32, ctx);
  engine.WaitForAll();  // the inputs are in place before the gate closes

  const uint64_t version = engine.VarVersion(state.weights.var());
  if (gate != nullptr) gate->Close(engine, state.weights);
  const TbeOptions options{.validate = validate};
  for (std::size_t s = 0; s < batches.size(); ++s) {
    EmbeddingBagForward(tables, state.weights, batches[s].view(), out, options);
    EmbeddingBagBackwardSgd(tables, state.weights, batches[s].view(), grads[s], chain.sgd, options);
  }
  ChainResult result;
  if (gate != nullptr) {
    const uint64_t target = version + 1 + batches.size();  // the gate, then every backward
    result.ran_while_held =
        Eventually([&] { return engine.VarVersion(state.weights.var()) >= target; },
                   std::chrono::seconds(20)) &&
        gate->holding();
    gate->Open();
  }
  result.weights = ToHost<float>(state.weights);
  result.out = ToHost<float>(out);
  return result;
}

// 50 steps with validation on under an Async engine: while a gate holds the
// GPU, every op completes (none waits for the GPU: the old validation's
// stream sync stalled the first one until the gate opened), the tables'
// upload included (a TbeTables of its own); the weights and the last output
// are then those of the runs without the gate and without validation, bit
// for bit, and close to the CPU's (f32 rounding in the optimizer: nvcc
// fuses w - lr * g). The first, ungated run also loads every kernel (a first
// launch may wait for the GPU while it loads the module) and fills the
// memory pools, so that the held run takes nothing from the system
// allocators (which may wait for the GPU too).
TEST_P(EmbeddingBagValidationCudaTest, ValidatedChainKeepsTheGpuBusyAndMatches) {
  if (!IsAsync()) GTEST_SKIP() << "the plain engines sync each GPU op's stream by design";
  constexpr int kSteps = 50;
  const ChainResult checked = RunChain(*engine_, RandomChain(kSteps), kGpu, true, nullptr);
  ChainResult held;
  {
    StreamGate gate;
    held = RunChain(*engine_, RandomChain(kSteps), kGpu, true, &gate);
  }
  EXPECT_TRUE(held.ran_while_held)
      << "the validated ops did not all complete while the GPU was held: one waited for it";
  EXPECT_EQ(held.weights, checked.weights);
  EXPECT_EQ(held.out, checked.out);
  const ChainResult unchecked = RunChain(*engine_, RandomChain(kSteps), kGpu, false, nullptr);
  EXPECT_EQ(checked.weights, unchecked.weights);
  EXPECT_EQ(checked.out, unchecked.out);
  const ChainResult cpu = RunChain(*engine_, RandomChain(kSteps), kCpu, true, nullptr);
  ExpectClose(checked.weights, std::vector<double>(cpu.weights.begin(), cpu.weights.end()), 1e-5,
              1e-4, "weights after 50 steps, GPU against CPU");
}

// The tables' arrays are copied to a GPU once per TbeTables (shared by its
// copies), from the op's device manager, and released with the last
// TbeTables. Without validation a forward allocates nothing else there, so
// the manager's allocations count the uploads.
TEST_P(EmbeddingBagValidationCudaTest, TablesAreUploadedOncePerTbeTablesAndGpu) {
  const std::unique_ptr<storage::StorageManager> memory =
      storage::CreateStorageManager(storage::MemoryKind::kDevice, 0, storage::StorageOptions{});
  const TbeProblem p = SmallTbeProblem(5);
  const TbeOptions options{.validate = false, .device_memory = memory.get()};
  std::vector<float> gpu;
  {
    auto engine = MakeEngine(GetParam());  // goes before `memory`
    TbeTensors t = MakeTbeTensors(*engine, p, kGpu, DType::kI64);
    {
      const TbeTables tables = p.tables();
      for (int i = 0; i < 20; ++i) {
        EmbeddingBagForward(tables, t.weights, t.batch(p.batch_size), t.out, options);
      }
      const TbeTables copy = tables;
      for (int i = 0; i < 5; ++i) {
        EmbeddingBagForward(copy, t.weights, t.batch(p.batch_size), t.out, options);
      }
      engine->WaitForAll();
      EXPECT_EQ(memory->Stats().allocations, 1u) << "25 forwards of one TbeTables and its copy";
      const TbeTables other = p.tables();  // equal, but a TbeTables of its own
      EmbeddingBagForward(other, t.weights, t.batch(p.batch_size), t.out, options);
      engine->WaitForAll();
      EXPECT_EQ(memory->Stats().allocations, 2u);
      gpu = ToHost<float>(t.out);
    }
    engine->WaitForAll();
  }
  EXPECT_EQ(memory->Stats().allocated, 0u) << "the copies go with their TbeTables";
  const std::vector<float> cpu = RunTbeForward(*engine_, p, kCpu, DType::kI64, {});
  ExpectClose(gpu, std::vector<double>(cpu.begin(), cpu.end()), 1e-5, 2e-5, "out");
}

TEST_P(EmbeddingBagValidationCudaTest, MemoryOptionsMustFitTheOp) {
  const TbeProblem p = SmallTbeProblem(5);
  TbeTensors t = MakeTbeTensors(*engine_, p, kGpu, DType::kI64);
  storage::StorageManager& pinned = storage::GetStorage(storage::MemoryKind::kPinned);
  storage::StorageManager& device = storage::GetStorage(storage::MemoryKind::kDevice, 0);
  EXPECT_THAT(ErrorOf([&] {
                EmbeddingBagForward(p.tables(), t.weights, t.batch(4), t.out,
                                    {.device_memory = &pinned});
              }),
              HasSubstr("[EmbeddingBagForward] `options.device_memory` is "));
  EXPECT_THAT(ErrorOf([&] {
                EmbeddingBagForward(p.tables(), t.weights, t.batch(4), t.out,
                                    {.pinned_memory = &device});
              }),
              HasSubstr("[EmbeddingBagForward] `options.pinned_memory` is "));
  engine_->WaitForAll();
}

INSTANTIATE_TEST_SUITE_P(Engines, EmbeddingBagValidationCudaTest,
                         ::testing::ValuesIn(EngineNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace ember::ops::testing
