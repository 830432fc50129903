// Loader: every batch arrives, in order, the short last one included, then
// the end (no hang); a source's error arrives at Pop after the batches
// before it; a stalled thread holds up only the batch it claimed; stopping
// never hangs, with every batch made or a consumer waiting; the memory kind
// follows the machine.

#include "tools/train/data/loader.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "engine/base/device.h"
#include "engine/base/mutex.h"
#include "engine/engine.h"
#include "engine/error.h"
#include "storage/memory.h"
#include "tests/train/criteo_test_lines.h"
#include "tests/train/data_test_util.h"
#include "tools/train/data/criteo_text_source.h"
#include "tools/train/data/synthetic_source.h"

namespace ember::train {
namespace {

using std::chrono::milliseconds;
using testing::ExpectThrowWith;

SyntheticOptions Small(int64_t num_examples) {
  SyntheticOptions o;
  o.batch_size = 64;
  o.num_examples = num_examples;
  o.rows = {1000, 100, 10};
  return o;
}

// A source that counts its batches and can be slowed down, around a
// synthetic one.
class CountingSource final : public BatchSource {
 public:
  CountingSource(const SyntheticOptions& options, milliseconds delay)
      : BatchSource(options.batch_size), inner_(options), delay_(delay) {}
  const DataSpec& spec() const override { return inner_.spec(); }
  int64_t position() const override { return inner_.position(); }
  std::optional<int64_t> size() const override { return inner_.size(); }
  std::optional<HostBatch> Next(const BatchMemory& memory) override {
    std::this_thread::sleep_for(delay_);
    ++made_;
    return inner_.Next(memory);
  }
  void Seek(int64_t example) override { inner_.Seek(example); }
  [[nodiscard]] int made() const { return made_.load(); }

 private:
  SyntheticSource inner_;
  milliseconds delay_;
  std::atomic<int> made_{0};
};

// A synthetic source that forks and fails at the batch starting at
// `bad_at` (in every fork), as a bad record in a file would.
class FailingSource final : public BatchSource {
 public:
  FailingSource(const SyntheticOptions& options, int64_t bad_at)
      : BatchSource(options.batch_size), inner_(options), bad_at_(bad_at) {}
  const DataSpec& spec() const override { return inner_.spec(); }
  int64_t position() const override { return inner_.position(); }
  std::optional<int64_t> size() const override { return inner_.size(); }
  std::optional<HostBatch> Next(const BatchMemory& memory) override {
    if (inner_.position() == bad_at_) throw InvalidArgument("[FailingSource] bad batch");
    return inner_.Next(memory);
  }
  void Seek(int64_t example) override { inner_.Seek(example); }
  std::unique_ptr<BatchSource> Fork() const override {
    return std::make_unique<FailingSource>(inner_.options(), bad_at_);
  }

 private:
  SyntheticSource inner_;
  int64_t bad_at_;
};

// A forking synthetic source whose original, the reader of the loader's
// first thread, blocks in Next until released; its forks count the
// batches they make.
class GatedSource final : public BatchSource {
 public:
  struct Shared {
    Notification release;
    std::atomic<bool> gated_waits{false};
    std::atomic<int> fork_batches{0};
  };
  GatedSource(const SyntheticOptions& options, std::shared_ptr<Shared> shared, bool gated)
      : BatchSource(options.batch_size),
        inner_(options),
        shared_(std::move(shared)),
        gated_(gated) {}
  const DataSpec& spec() const override { return inner_.spec(); }
  int64_t position() const override { return inner_.position(); }
  std::optional<int64_t> size() const override { return inner_.size(); }
  std::optional<HostBatch> Next(const BatchMemory& memory) override {
    if (gated_) {
      shared_->gated_waits = true;
      shared_->release.WaitForNotification();
    } else {
      ++shared_->fork_batches;
    }
    return inner_.Next(memory);
  }
  void Seek(int64_t example) override { inner_.Seek(example); }
  std::unique_ptr<BatchSource> Fork() const override {
    return std::make_unique<GatedSource>(inner_.options(), shared_, false);
  }

 private:
  SyntheticSource inner_;
  std::shared_ptr<Shared> shared_;
  bool gated_;
};

class LoaderTest : public ::testing::Test {
 protected:
  std::unique_ptr<engine::Engine> engine_ = testing::MakeEngine();
  BatchMemory memory_{.engine = engine_.get(), .kind = storage::MemoryKind::kCpu};
};

TEST_F(LoaderTest, EveryBatchArrivesInOrderThenTheEnd) {
  SyntheticSource direct(Small(1000));
  const auto expected = testing::ReadAll(direct, memory_);
  ASSERT_EQ(expected.size(), 16u);
  Loader loader(*engine_, std::make_unique<SyntheticSource>(Small(1000)), {.depth = 3});
  for (size_t i = 0; i < expected.size(); ++i) {
    std::optional<HostBatch> batch = loader.Pop();
    ASSERT_TRUE(batch.has_value()) << "batch " << i;
    EXPECT_EQ(batch->position, expected[i].position);
    EXPECT_EQ(batch->batch_size, expected[i].batch_size);
    EXPECT_EQ(testing::Bytes(*batch), testing::Bytes(expected[i])) << "batch " << i;
  }
  EXPECT_EQ(expected.back().batch_size, 1000 - 15 * 64);
  EXPECT_FALSE(loader.Pop().has_value());
  EXPECT_FALSE(loader.Pop().has_value());
}

TEST_F(LoaderTest, ThreadsGiveTheBatchesOfOneThreadInOrder) {
  SyntheticSource direct(Small(1000));
  (void)direct.Next(memory_);  // the loader starts where the source stands
  const auto expected = testing::ReadAll(direct, memory_);
  ASSERT_EQ(expected.size(), 15u);
  for (int depth : {1, 5}) {
    auto source = std::make_unique<SyntheticSource>(Small(1000));
    source->Seek(64);
    Loader loader(*engine_, std::move(source), {.depth = depth, .threads = 3});
    EXPECT_EQ(loader.threads(), 3);
    for (size_t i = 0; i < expected.size(); ++i) {
      std::optional<HostBatch> batch = loader.Pop();
      ASSERT_TRUE(batch.has_value()) << "batch " << i << ", depth " << depth;
      EXPECT_EQ(batch->position, expected[i].position);
      EXPECT_EQ(testing::Bytes(*batch), testing::Bytes(expected[i])) << "batch " << i;
    }
    EXPECT_FALSE(loader.Pop().has_value());
    EXPECT_FALSE(loader.Pop().has_value());
  }
}

TEST_F(LoaderTest, ASourceThatDoesNotForkGetsOneThread) {
  Loader loader(*engine_, std::make_unique<CountingSource>(Small(100), milliseconds(0)),
                {.threads = 4});
  EXPECT_EQ(loader.threads(), 1);
  int batches = 0;
  while (loader.Pop()) ++batches;
  EXPECT_EQ(batches, 2);
}

TEST_F(LoaderTest, AThreadsErrorArrivesAfterTheBatchesBeforeItWhateverTheOthersMade) {
  // Batch 4 (of 64 examples each) is bad; the other threads go on past it.
  Loader loader(*engine_, std::make_unique<FailingSource>(Small(kEndless), 4 * 64),
                {.depth = 6, .threads = 3});
  for (int64_t i = 1; i <= 4; ++i) {
    std::optional<HostBatch> batch = loader.Pop();
    ASSERT_TRUE(batch.has_value());
    EXPECT_EQ(batch->position, i * 64);
  }
  for (int i = 0; i < 2; ++i) {
    ExpectThrowWith<InvalidArgument>([&] { (void)loader.Pop(); }, {"[FailingSource] bad batch"});
  }
}

// The check runs on every batch, on the loader's threads (the thread that
// made it), and its error is the batch's, as a source's would be.
TEST_F(LoaderTest, TheCheckRunsOnEveryBatchAndItsErrorIsTheBatchs) {
  Mutex mu;
  std::vector<int64_t> checked;
  std::vector<std::thread::id> checkers;
  auto check = [&](const HostBatch& batch) {
    MutexLock lock(&mu);
    checked.push_back(batch.position);
    checkers.push_back(std::this_thread::get_id());
    if (batch.position == int64_t{6} * 64) throw InvalidArgument("[check] bad batch");
  };
  Loader loader(*engine_, std::make_unique<SyntheticSource>(Small(kEndless)),
                {.depth = 2, .threads = 3, .check = check});
  for (int64_t i = 1; i <= 5; ++i) {
    std::optional<HostBatch> batch = loader.Pop();
    ASSERT_TRUE(batch.has_value());
    EXPECT_EQ(batch->position, i * 64);
  }
  for (int i = 0; i < 2; ++i) {
    ExpectThrowWith<InvalidArgument>([&] { (void)loader.Pop(); }, {"[check] bad batch"});
  }
  loader.Stop();
  MutexLock lock(&mu);
  for (int64_t i = 1; i <= 6; ++i) {
    EXPECT_NE(std::find(checked.begin(), checked.end(), i * 64), checked.end()) << "batch " << i;
  }
  for (std::thread::id id : checkers) EXPECT_NE(id, std::this_thread::get_id());
}

// A thread that shares its core with a busy one makes its batch late; the
// other threads must make every other batch that may be claimed meanwhile,
// not only their share, and the order must hold when the late one comes.
TEST_F(LoaderTest, AStalledThreadHoldsUpOnlyTheBatchItClaimed) {
  constexpr int kDepth = 2;
  constexpr int kThreads = 3;
  constexpr int kAhead = kDepth + kThreads;
  auto shared = std::make_shared<GatedSource::Shared>();
  Loader loader(*engine_, std::make_unique<GatedSource>(Small(kEndless), shared, true),
                {.depth = kDepth, .threads = kThreads});
  struct ReleaseOnExit {  // before the loader's Stop, which waits for the gated thread
    GatedSource::Shared* shared;
    ~ReleaseOnExit() { shared->release.Notify(); }
  } release_on_exit{shared.get()};
  ASSERT_EQ(loader.threads(), kThreads);
  auto claimed = [&] { return shared->fork_batches.load() + (shared->gated_waits ? 1 : 0); };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (claimed() < kAhead && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  std::this_thread::sleep_for(milliseconds(20));
  // Fixed shares would stop each fork at its own batches (one or two).
  EXPECT_EQ(claimed(), kAhead);
  shared->release.Notify();
  SyntheticSource direct(Small(kEndless));
  for (int i = 0; i < 3 * kAhead; ++i) {
    std::optional<HostBatch> expected = direct.Next(memory_);
    std::optional<HostBatch> batch = loader.Pop();
    ASSERT_TRUE(batch.has_value()) << "batch " << i;
    EXPECT_EQ(batch->position, expected->position);
    EXPECT_EQ(testing::Bytes(*batch), testing::Bytes(*expected)) << "batch " << i;
  }
}

TEST_F(LoaderTest, TheSourceComesBackAfterTheLastBatchPopped) {
  Loader loader(*engine_, std::make_unique<SyntheticSource>(Small(kEndless)),
                {.depth = 6, .threads = 3});
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(loader.Pop().has_value());
  std::unique_ptr<BatchSource> source = loader.TakeSource();
  ASSERT_NE(source, nullptr);
  EXPECT_EQ(source->position(), 5 * 64);  // not where a thread's reader stood
}

TEST_F(LoaderTest, ASlowConsumerLosesNothing) {
  Loader loader(*engine_, std::make_unique<SyntheticSource>(Small(500)), {.depth = 1});
  int64_t position = 0;
  while (auto batch = loader.Pop()) {
    std::this_thread::sleep_for(milliseconds(2));
    EXPECT_EQ(batch->position, std::min<int64_t>(position + 64, 500));
    position = batch->position;
  }
  EXPECT_EQ(position, 500);
}

TEST_F(LoaderTest, ASourceErrorArrivesAtPopAfterTheBatchesBeforeIt) {
  const std::string path = testing::WriteTempFile(
      "bad.tsv", testing::GoodLines(0, 6) + "1\t2\tzz\n" + testing::GoodLines(6, 4));
  Loader loader(*engine_,
                std::make_unique<CriteoTextSource>(
                    CriteoTextOptions{.batch_size = 2, .paths = {path}, .rows = testing::Rows()}),
                {.depth = 2});
  for (int64_t position : {2, 4, 6}) {
    std::optional<HostBatch> batch = loader.Pop();
    ASSERT_TRUE(batch.has_value());
    EXPECT_EQ(batch->position, position);
  }
  // Again at every later Pop: the error is not mistaken for the end.
  for (int i = 0; i < 2; ++i) {
    ExpectThrowWith<InvalidArgument>([&] { (void)loader.Pop(); },
                                     {"[CriteoTextSource] ", "bad.tsv:7: has 3 fields"});
  }
}

TEST_F(LoaderTest, DestroyingItWithEveryBatchMadeDoesNotHang) {
  auto source = std::make_unique<CountingSource>(Small(kEndless), milliseconds(0));
  CountingSource* counting = source.get();
  auto loader = std::make_unique<Loader>(*engine_, std::move(source), LoaderOptions{.depth = 2});
  ASSERT_TRUE(loader->Pop().has_value());
  // Wait until the thread has made all it may and sits on it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (counting->made() < 4 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_EQ(counting->made(), 4);  // 1 popped + depth 2 + 1 thread: the thread waits
  loader.reset();                  // the test's deadline catches a hang
}

TEST_F(LoaderTest, StopWakesAWaitingConsumer) {
  Loader loader(*engine_, std::make_unique<CountingSource>(Small(kEndless), milliseconds(200)),
                {.depth = 2});
  std::optional<HostBatch> got;
  std::atomic<bool> returned{false};
  std::thread consumer([&] {
    // The first batch takes 200 ms; the Pop after it waits again.
    got = loader.Pop();
    got = loader.Pop();
    returned = true;
  });
  std::this_thread::sleep_for(milliseconds(250));
  loader.Stop();
  consumer.join();
  EXPECT_TRUE(returned);
  EXPECT_FALSE(loader.Pop().has_value());
  loader.Stop();  // idempotent
}

TEST_F(LoaderTest, TheSourceComesBackForTheNextEpoch) {
  Loader first(*engine_, std::make_unique<SyntheticSource>(Small(200)));
  std::vector<std::vector<uint8_t>> epoch1;
  while (auto batch = first.Pop()) epoch1.push_back(testing::Bytes(*batch));
  std::unique_ptr<BatchSource> source = first.TakeSource();
  ASSERT_NE(source, nullptr);
  EXPECT_EQ(source->position(), 200);
  EXPECT_EQ(first.TakeSource(), nullptr);
  source->Seek(0);
  Loader second(*engine_, std::move(source));
  std::vector<std::vector<uint8_t>> epoch2;
  while (auto batch = second.Pop()) epoch2.push_back(testing::Bytes(*batch));
  EXPECT_EQ(epoch1, epoch2);
}

TEST_F(LoaderTest, MemoryIsPinnedOnlyWithAGpu) {
  Loader loader(*engine_, std::make_unique<SyntheticSource>(Small(64)));
  const storage::MemoryKind expected =
      GpuCount() > 0 ? storage::MemoryKind::kPinned : storage::MemoryKind::kCpu;
  EXPECT_EQ(loader.kind(), expected);
  std::optional<HostBatch> batch = loader.Pop();
  ASSERT_TRUE(batch.has_value());
  for (const storage::Tensor* t :
       {&batch->dense, &batch->indices, &batch->offsets, &batch->labels}) {
    EXPECT_EQ(t->kind(), expected);
    EXPECT_EQ(t->ctx(), engine::Context::CPU());
  }
  EXPECT_EQ(loader.depth(), 4);
}

TEST_F(LoaderTest, RefusesBadOptions) {
  ExpectThrowWith<InvalidArgument>([&] { Loader l(*engine_, nullptr); }, {"[Loader]", "no source"});
  ExpectThrowWith<InvalidArgument>(
      [&] { Loader l(*engine_, std::make_unique<SyntheticSource>(Small(64)), {.depth = 0}); },
      {"[Loader]", "depth 0"});
  ExpectThrowWith<InvalidArgument>(
      [&] { Loader l(*engine_, std::make_unique<SyntheticSource>(Small(64)), {.threads = -1}); },
      {"[Loader]", "threads -1"});
  ExpectThrowWith<InvalidArgument>(
      [&] {
        Loader l(*engine_, std::make_unique<SyntheticSource>(Small(64)),
                 {.kind = storage::MemoryKind::kDevice});
      },
      {"[Loader]", "not a host kind"});
}

}  // namespace
}  // namespace ember::train
