// tools/train/stall_stacks.sh: runs that finish are counted, a run that
// stalls gets its stacks taken (here by a stand-in debugger, `true`, since
// CI machines need not have gdb) and is killed, and bad arguments exit 2.

#include <unistd.h>  // getpid

#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/train/dist/dist_test_util.h"

namespace ember::train {
namespace {

using ::testing::HasSubstr;

using testing::Shell;

class StallStacksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(script_)) {
      GTEST_SKIP() << script_ << " is not here (a test binary copied away from its source tree)";
    }
    dir_ = std::filesystem::temp_directory_path() /
           ("stall_stacks_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::pair<std::string, int> Run(const std::string& args) {
    return Shell("bash " + script_ + " --dir=" + dir_.string() + " " + args);
  }

  const std::string script_ = EMBER_STALL_STACKS_SCRIPT;
  std::filesystem::path dir_;
};

TEST_F(StallStacksTest, RunsThatFinishAreCountedAndLogged) {
  const auto [out, status] = Run("--tries=2 --after_s=30 --debugger=true -- echo hello");
  EXPECT_EQ(status, 1) << out;
  EXPECT_THAT(out, HasSubstr("run 2: finished in"));
  EXPECT_THAT(out, HasSubstr("no run stalled in 2 tries"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "run1.log"));
}

TEST_F(StallStacksTest, AStalledRunGetsItsStacksTakenAndIsKilled) {
  const std::string pid_file = (dir_ / "pid").string();
  const auto [out, status] = Run("--tries=3 --after_s=1 --debugger=true -- bash -c 'echo $$ > " +
                                 pid_file + "; exec sleep 600'");
  EXPECT_EQ(status, 0) << out;
  EXPECT_THAT(out, HasSubstr("run 1: still running after 1 s; taking its stacks"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "stacks.txt"));
  std::string pid;
  std::ifstream(pid_file) >> pid;
  ASSERT_FALSE(pid.empty()) << out;
  EXPECT_FALSE(std::filesystem::exists("/proc/" + pid)) << "the stalled run was not killed";
}

TEST_F(StallStacksTest, BadArgumentsExitTwoNamingThem) {
  const auto [tries, tries_status] = Run("--tries=x -- true");
  EXPECT_EQ(tries_status, 2);
  EXPECT_THAT(tries, HasSubstr("--tries='x' is not a positive integer"));
  const auto [none, none_status] = Run("--debugger=true --");
  EXPECT_EQ(none_status, 2);
  EXPECT_THAT(none, HasSubstr("no command after --"));
  const auto [debugger, debugger_status] = Run("--debugger=/no/such/gdb -- true");
  EXPECT_EQ(debugger_status, 2);
  EXPECT_THAT(debugger, HasSubstr("--debugger '/no/such/gdb' is not an executable"));
}

}  // namespace
}  // namespace ember::train
