// The Async engines' GPU sync layer on a real GPU: SyncObject says what to
// wait for, SyncStream waits without host blocks (skipping what stream
// order already covers and what the GPU has passed) and records an event
// again only after the GPU has passed it. Skipped without a CUDA device.

#include "engine/internal/cuda/sync_object.h"

#include <memory>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "engine/base/device.h"
#include "engine/cuda/check.h"
#include "tests/engine/cuda/test_kernels.h"

namespace ember::engine::internal {
namespace {

using testing::LaunchCheckedIncrement;
using testing::LaunchDelayedCopy;
using testing::LaunchDelayedStore;

class GpuSyncTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (GpuCount() == 0) GTEST_SKIP() << "no CUDA device (or driver) on this machine";
    CudaCheck(cudaSetDevice(0), "cudaSetDevice");
    for (uint32_t id = 0; id < 3; ++id) {
      cudaStream_t stream = nullptr;
      CudaCheck(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
      streams_.push_back(std::make_unique<SyncStream>(stream, id, /*max_events=*/2));
    }
    CudaCheck(cudaMallocHost(reinterpret_cast<void**>(&host_), 4 * sizeof(int)), "cudaMallocHost");
    std::fill(host_, host_ + 4, 0);
  }
  void TearDown() override {
    if (streams_.empty()) return;
    streams_.clear();  // each drains, then is destroyed
    CudaCheck(cudaFreeHost(host_), "cudaFreeHost");
  }
  void SyncAll() {
    for (auto& stream : streams_) {
      CudaCheck(cudaStreamSynchronize(stream->get()), "cudaStreamSynchronize");
    }
  }
  SyncStream& stream(int i) { return *streams_[i]; }

  std::vector<std::unique_ptr<SyncStream>> streams_;
  int* host_ = nullptr;  // pinned, written by kernels, read here after syncs
};

TEST_F(GpuSyncTest, ReadOnAnotherStreamWaitsForTheWrite) {
  SyncObject var;
  LaunchDelayedStore(stream(0).get(), &host_[0], 42, 5000);
  var.Completed(Access::kWrite, stream(0).Record("op"));
  EventWaits waits;
  var.CollectWaits(Access::kRead, &waits);
  EXPECT_EQ(stream(1).WaitFor(waits, "read"), 1);
  LaunchDelayedCopy(stream(1).get(), &host_[0], &host_[1], 0);
  SyncAll();
  EXPECT_EQ(host_[1], 42);
}

// The setup above can fail: without the wait the read overtakes the write.
TEST_F(GpuSyncTest, WithoutTheWaitTheReadOvertakesTheWrite) {
  LaunchDelayedStore(stream(0).get(), &host_[0], 42, 20000);
  LaunchDelayedCopy(stream(1).get(), &host_[0], &host_[1], 0);
  SyncAll();
  EXPECT_EQ(host_[1], 0);
}

TEST_F(GpuSyncTest, WriteWaitsForTheReadersOfEveryStream) {
  SyncObject var;
  host_[0] = 1;
  LaunchDelayedCopy(stream(0).get(), &host_[0], &host_[1], 5000);
  var.Completed(Access::kRead, stream(0).Record("op"));
  LaunchDelayedCopy(stream(1).get(), &host_[0], &host_[2], 5000);
  var.Completed(Access::kRead, stream(1).Record("op"));
  EventWaits waits;
  var.CollectWaits(Access::kWrite, &waits);
  EXPECT_EQ(waits.size(), 2u);
  EXPECT_EQ(stream(2).WaitFor(waits, "write"), 2);
  LaunchDelayedStore(stream(2).get(), &host_[0], 99, 0);
  SyncAll();
  EXPECT_EQ(host_[1], 1);
  EXPECT_EQ(host_[2], 1);
  EXPECT_EQ(host_[0], 99);
}

TEST_F(GpuSyncTest, OwnStreamAndCoveredWaitsAreSkipped) {
  LaunchDelayedStore(stream(0).get(), &host_[0], 1, 20000);  // keeps both events pending
  const StreamEvent first = stream(0).Record("op");
  const StreamEvent second = stream(0).Record("op");
  const StreamEvent both[] = {first, second};
  EXPECT_EQ(stream(0).WaitFor(both, "own"), 0);
  EXPECT_EQ(stream(1).WaitFor({&first, 1}, "b"), 1);
  EXPECT_EQ(stream(1).WaitFor({&first, 1}, "b"), 0);
  EXPECT_EQ(stream(1).WaitFor({&second, 1}, "b"), 1);
  EXPECT_EQ(stream(1).WaitFor(both, "b"), 0);
}

// Once the stream has seen an event complete, nobody waits on it or keeps it.
TEST_F(GpuSyncTest, EventsTheGpuPassedAreNeitherWaitedOnNorKept) {
  SyncObject var;
  LaunchDelayedStore(stream(0).get(), &host_[0], 3, 1000);
  const StreamEvent write = stream(0).Record("op");
  var.Completed(Access::kWrite, write);
  EventWaits waits;
  var.CollectWaits(Access::kRead, &waits);
  EXPECT_EQ(waits.size(), 1u) << "the write may still be running";
  SyncAll();
  stream(0).Record("op");  // notices that the GPU passed `write`
  stream(0).Record("op");
  EXPECT_TRUE(stream(0).Passed(write));
  waits.clear();
  var.CollectWaits(Access::kWrite, &waits);
  EXPECT_TRUE(waits.empty());
  EXPECT_EQ(stream(1).WaitFor({&write, 1}, "b"), 0);
  EXPECT_EQ(host_[0], 3);
}

TEST_F(GpuSyncTest, EventsAreRecordedAgainOnlyAfterTheGpuPassedThem) {
  for (int i = 0; i < 100; ++i) {
    LaunchDelayedStore(stream(0).get(), &host_[0], i, 200);
    stream(0).Record("op");
  }
  SyncAll();
  EXPECT_EQ(host_[0], 99);
  EXPECT_LE(stream(0).events_created(), 2u) << "the cap is 2 per stream";
}

TEST_F(GpuSyncTest, HostWaitSeesTheGpuWrite) {
  SyncObject var;
  LaunchDelayedStore(stream(0).get(), &host_[0], 7, 5000);
  var.Completed(Access::kWrite, stream(0).Record("op"));
  EventWaits waits;
  var.CollectWaits(Access::kRead, &waits);
  HostWaitFor(waits, "cpu reader");
  EXPECT_EQ(host_[0], 7);
  EXPECT_TRUE(stream(0).Passed(waits.front())) << "a host wait raises the watermark";
}

// A reap frees every passed event at once, found by bisection: a stream
// capped at 64 events reaps once 64 are in flight; with all of them passed,
// the 65th record reuses one instead of waiting.
TEST_F(GpuSyncTest, OneReapFreesEveryPassedEvent) {
  cudaStream_t raw = nullptr;
  CudaCheck(cudaStreamCreateWithFlags(&raw, cudaStreamNonBlocking), "cudaStreamCreate");
  SyncStream wide(raw, 3, /*max_events=*/64);
  std::vector<StreamEvent> events;
  for (int i = 0; i < 64; ++i) {
    LaunchDelayedStore(wide.get(), &host_[2], i, 20);
    events.push_back(wide.Record("op"));
  }
  CudaCheck(cudaStreamSynchronize(wide.get()), "cudaStreamSynchronize");
  wide.Record("op");
  EXPECT_EQ(wide.events_created(), 64u);
  for (const StreamEvent& event : events) EXPECT_TRUE(wide.Passed(event)) << event.sequence;
  EXPECT_EQ(host_[2], 63);
}

// A 3,000-op chain hopping between three streams, each op a checked
// increment of one counter, with 2 events per stream: every op must see its
// predecessor's value, so no recycled event may drop a dependency.
TEST_F(GpuSyncTest, ChainAcrossStreamsWithTwoEventsPerStreamKeepsOrder) {
  SyncObject var;
  std::mt19937 rng(5);
  constexpr int kOps = 3000;
  for (int i = 0; i < kOps; ++i) {
    SyncStream& s = stream(static_cast<int>(rng() % 3));
    EventWaits waits;
    var.CollectWaits(Access::kWrite, &waits);
    s.WaitFor(waits, "increment");
    LaunchCheckedIncrement(s.get(), &host_[0], i, &host_[1], static_cast<int>(rng() % 20));
    CudaCheck(cudaGetLastError(), "LaunchCheckedIncrement");
    var.Completed(Access::kWrite, s.Record("op"));
  }
  SyncAll();
  EXPECT_EQ(host_[0], kOps);
  EXPECT_EQ(host_[1], 0) << "ops ran out of order";
  for (int i = 0; i < 3; ++i) EXPECT_LE(stream(i).events_created(), 2u);
}

}  // namespace
}  // namespace ember::engine::internal
