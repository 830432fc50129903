// The Async engines' GPU sync layer on a real GPU: SyncObject says what to
// wait for, SyncStream waits without host blocks (skipping what stream
// order already covers), EventPool reuses an event only once nobody holds
// it. Skipped without a CUDA device.

#include "engine/internal/cuda/sync_object.h"

#include <memory>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "engine/internal/cuda/cuda_check.h"
#include "engine/internal/cuda/event_pool.h"
#include "tests/engine/cuda/test_kernels.h"

namespace ember::engine::internal {
namespace {

using testing::LaunchCheckedIncrement;
using testing::LaunchDelayedCopy;
using testing::LaunchDelayedStore;

class GpuSyncTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device (or driver) on this machine";
    CudaCheck(cudaSetDevice(0), "cudaSetDevice");
    for (uint32_t id = 0; id < 3; ++id) {
      cudaStream_t stream = nullptr;
      CudaCheck(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
      streams_.push_back(std::make_unique<SyncStream>(stream, id));
    }
    CudaCheck(cudaMallocHost(reinterpret_cast<void**>(&host_), 4 * sizeof(int)), "cudaMallocHost");
    std::fill(host_, host_ + 4, 0);
    pool_ = EventPool::Create(0, 2);
  }
  void TearDown() override {
    if (streams_.empty()) return;
    for (auto& stream : streams_) {
      CudaCheck(cudaStreamSynchronize(stream->get()), "cudaStreamSynchronize");
      CudaCheck(cudaStreamDestroy(stream->get()), "cudaStreamDestroy");
    }
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
  std::shared_ptr<EventPool> pool_;
};

TEST_F(GpuSyncTest, ReadOnAnotherStreamWaitsForTheWrite) {
  SyncObject var;
  LaunchDelayedStore(stream(0).get(), &host_[0], 42, 5000);
  var.Completed(Access::kWrite, pool_->Record(stream(0)));
  std::vector<EventRef> waits;
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
  var.Completed(Access::kRead, pool_->Record(stream(0)));
  LaunchDelayedCopy(stream(1).get(), &host_[0], &host_[2], 5000);
  var.Completed(Access::kRead, pool_->Record(stream(1)));
  std::vector<EventRef> waits;
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
  EventRef first = pool_->Record(stream(0));
  EventRef second = pool_->Record(stream(0));
  EXPECT_EQ(stream(0).WaitFor({first, second}, "own"), 0);
  EXPECT_EQ(stream(1).WaitFor({first}, "b"), 1);
  EXPECT_EQ(stream(1).WaitFor({first}, "b"), 0);
  EXPECT_EQ(stream(1).WaitFor({second}, "b"), 1);
  EXPECT_EQ(stream(1).WaitFor({first, second}, "b"), 0);
}

TEST_F(GpuSyncTest, HostWaitSeesTheGpuWrite) {
  SyncObject var;
  LaunchDelayedStore(stream(0).get(), &host_[0], 7, 5000);
  var.Completed(Access::kWrite, pool_->Record(stream(0)));
  std::vector<EventRef> waits;
  var.CollectWaits(Access::kRead, &waits);
  HostWaitFor(waits, "cpu reader");
  EXPECT_EQ(host_[0], 7);
}

TEST_F(GpuSyncTest, EventReturnsToThePoolOnlyAfterItsLastReference) {
  EventRef event = pool_->Record(stream(0));
  EventRef copy = event;
  SyncAll();
  EXPECT_EQ(pool_->cached(), 0u);
  event.reset();
  EXPECT_EQ(pool_->cached(), 0u) << "a holder remains";
  copy.reset();
  EXPECT_EQ(pool_->cached(), 1u);
}

// A 3,000-op chain hopping between three streams, each op a checked
// increment of one counter, with the pool capped at 2 cached events: every
// op must see its predecessor's value, so no recycled event may drop a
// dependency.
TEST_F(GpuSyncTest, ChainAcrossStreamsWithTwoPooledEventsKeepsOrder) {
  SyncObject var;
  std::mt19937 rng(5);
  constexpr int kOps = 3000;
  for (int i = 0; i < kOps; ++i) {
    SyncStream& s = stream(static_cast<int>(rng() % 3));
    std::vector<EventRef> waits;
    var.CollectWaits(Access::kWrite, &waits);
    s.WaitFor(waits, "increment");
    LaunchCheckedIncrement(s.get(), &host_[0], i, &host_[1], static_cast<int>(rng() % 20));
    CudaCheck(cudaGetLastError(), "LaunchCheckedIncrement");
    var.Completed(Access::kWrite, pool_->Record(s));
  }
  SyncAll();
  EXPECT_EQ(host_[0], kOps);
  EXPECT_EQ(host_[1], 0) << "ops ran out of order";
  var.Clear();
  EXPECT_LE(pool_->cached(), 2u);
  EXPECT_LT(pool_->created(), 50u) << "events were not reused";
}

}  // namespace
}  // namespace ember::engine::internal
