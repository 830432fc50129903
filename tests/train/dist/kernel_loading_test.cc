// Kernel loading for several GPU ranks in one process
// (tools/train/dist/kernel_loading.h): the check refuses lazy loading with
// more than one GPU rank and names the fix; PreferEagerKernelLoading asks
// for eager loading without overriding a mode the user chose; and on a GPU,
// the driver's answer follows the environment this binary started with.

#include "tools/train/dist/kernel_loading.h"

#include <cstdlib>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/base/device.h"
#include "engine/error.h"

namespace ember::train {
namespace {

using ::testing::HasSubstr;

// The mode this binary started with, read before PreferEagerKernelLoading
// below, and that call itself: this binary runs two GPU ranks in one process
// (ShardedGpuTest, NcclTwoGpuTest), which TrainSharded allows only with eager
// loading. Static initializers run before main, so before CUDA starts.
const char* const kModeAtStart = std::getenv("CUDA_MODULE_LOADING");
const bool kEager = (PreferEagerKernelLoading(), true);

TEST(KernelLoadingTest, LazyLoadingIsRefusedForSeveralGpuRanks) {
  EXPECT_NO_THROW(CheckKernelLoading(1, /*lazy=*/true));
  EXPECT_NO_THROW(CheckKernelLoading(4, /*lazy=*/false));
  try {
    CheckKernelLoading(2, /*lazy=*/true);
    FAIL() << "two GPU ranks under lazy loading were allowed";
  } catch (const Unavailable& e) {
    EXPECT_THAT(e.what(), HasSubstr("[TrainSharded] 2 GPU ranks in one process"));
    EXPECT_THAT(e.what(), HasSubstr("Set CUDA_MODULE_LOADING=EAGER before the process starts"));
  }
}

// Restores CUDA_MODULE_LOADING as it was (unset or set).
class SavedMode {
 public:
  SavedMode() {
    const char* value = std::getenv("CUDA_MODULE_LOADING");
    if (value != nullptr) saved_ = value;
    was_set_ = value != nullptr;
  }
  ~SavedMode() {
    if (was_set_) {
      setenv("CUDA_MODULE_LOADING", saved_.c_str(), 1);
    } else {
      unsetenv("CUDA_MODULE_LOADING");
    }
  }

 private:
  std::string saved_;
  bool was_set_ = false;
};

TEST(KernelLoadingTest, EagerIsPreferredButAChosenModeIsKept) {
  const SavedMode saved;
  unsetenv("CUDA_MODULE_LOADING");
  PreferEagerKernelLoading();
  EXPECT_STREQ(std::getenv("CUDA_MODULE_LOADING"), "EAGER");
  setenv("CUDA_MODULE_LOADING", "LAZY", 1);
  PreferEagerKernelLoading();
  EXPECT_STREQ(std::getenv("CUDA_MODULE_LOADING"), "LAZY");
}

// Run this binary with CUDA_MODULE_LOADING=LAZY as well as without: the
// driver must then say lazy (and TrainSharded refuse two GPU ranks).
TEST(KernelLoadingTest, TheDriverSaysWhatTheEnvironmentAskedFor) {
  ASSERT_TRUE(kEager);
  if (GpuCount() == 0) GTEST_SKIP() << "no CUDA device: the driver has no mode to report";
  const bool asked_lazy = kModeAtStart != nullptr && std::string(kModeAtStart) == "LAZY";
  EXPECT_EQ(CudaLoadsKernelsLazily(), asked_lazy)
      << "CUDA_MODULE_LOADING at start: " << (kModeAtStart ? kModeAtStart : "(unset)");
}

}  // namespace
}  // namespace ember::train
