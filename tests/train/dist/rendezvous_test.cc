// The rendezvous of a multi-host run (tools/train/dist/rendezvous.h) and
// its launch script (tools/train/launch.sh): nodes as threads meet through
// a file and all get node 0's id; a file of an earlier run is ignored, one
// of another world shape refused; a node waiting for a node 0 that never
// comes times out naming the file; the environment is checked variable by
// variable; the script sets it and refuses bad arguments.

#include "tools/train/dist/rendezvous.h"

#include <stdlib.h>  // setenv, unsetenv
#include <unistd.h>  // getpid

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/error.h"
#include "tests/train/dist/dist_test_util.h"

namespace ember::train {
namespace {

using ::testing::HasSubstr;

NcclUniqueId FakeId(int seed) {
  NcclUniqueId id;
  for (size_t i = 0; i < id.bytes.size(); ++i) id.bytes[i] = static_cast<std::byte>(i + seed);
  return id;
}

class RendezvousTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("ember_rendezvous_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  ProcessGroupEnv Env(int rank, int nodes, const std::string& run) const {
    ProcessGroupEnv env;
    env.node_rank = rank;
    env.num_nodes = nodes;
    env.rendezvous_path = (dir_ / "rendezvous").string();
    env.run_id = run;
    env.timeout = std::chrono::milliseconds(5000);
    return env;
  }

  std::filesystem::path dir_;
};

TEST_F(RendezvousTest, EveryNodeGetsNodeZerosId) {
  constexpr int kNodes = 4;
  std::vector<NcclUniqueId> got(kNodes);
  testing::RunRankThreads(kNodes, [&](int node) {
    got[node] = Rendezvous(Env(node, kNodes, "run-1"), 8, [&] {
      if (node != 0) ADD_FAILURE() << "node " << node << " made an id";
      return FakeId(7);
    });
  });
  for (int node = 0; node < kNodes; ++node) EXPECT_EQ(got[node].bytes, FakeId(7).bytes) << node;
}

TEST_F(RendezvousTest, AnEarlierRunsFileIsNotThisRuns) {
  // An earlier run's file is there; node 1 must wait for this run's.
  Rendezvous(Env(0, 2, "old-run"), 8, [] { return FakeId(1); });
  std::vector<NcclUniqueId> got(2);
  testing::RunRankThreads(2, [&](int node) {
    if (node == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    got[node] = Rendezvous(Env(node, 2, "new-run"), 8, [] { return FakeId(2); });
  });
  EXPECT_EQ(got[1].bytes, FakeId(2).bytes);
}

TEST_F(RendezvousTest, AnotherWorldShapeIsRefused) {
  Rendezvous(Env(0, 2, "run"), 8, [] { return FakeId(3); });
  const std::string path = Env(0, 2, "run").rendezvous_path;
  EXPECT_EQ(testing::ErrorOf([&] { Rendezvous(Env(1, 2, "run"), 4, [] { return FakeId(3); }); }),
            "[Rendezvous] " + path +
                ": run 'run' was published with nodes=2 gpus_per_node=8; node 1 has nodes=2 "
                "gpus_per_node=4");
}

TEST_F(RendezvousTest, ANodeWithoutNodeZeroTimesOut) {
  ProcessGroupEnv env = Env(1, 2, "lonely");
  env.timeout = std::chrono::milliseconds(100);
  try {
    Rendezvous(env, 8, [] { return FakeId(0); });
    FAIL() << "no error";
  } catch (const Unavailable& e) {
    EXPECT_EQ(std::string(e.what()),
              "[Rendezvous] node 1: no rendezvous of run 'lonely' in " + env.rendezvous_path +
                  " after 100 ms (is node 0 running, with the same EMBER_RUN_ID and a path "
                  "both hosts share?)");
  }
}

// Sets the variables for the test's life; unsets them after.
class ScopedEnv {
 public:
  explicit ScopedEnv(std::vector<std::pair<std::string, std::string>> vars)
      : vars_(std::move(vars)) {
    for (const auto& [name, value] : vars_) ::setenv(name.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() {
    for (const auto& [name, value] : vars_) ::unsetenv(name.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::vector<std::pair<std::string, std::string>> vars_;
};

TEST(ProcessGroupEnvTest, ReadsAndChecksTheVariables) {
  {
    ScopedEnv env({{"EMBER_NUM_NODES", "3"},
                   {"EMBER_NODE_RANK", "2"},
                   {"EMBER_RENDEZVOUS", "/shared/r"},
                   {"EMBER_RUN_ID", "job42"},
                   {"EMBER_RENDEZVOUS_TIMEOUT_S", "9"}});
    const ProcessGroupEnv got = ProcessGroupFromEnv();
    EXPECT_EQ(got.num_nodes, 3);
    EXPECT_EQ(got.node_rank, 2);
    EXPECT_EQ(got.rendezvous_path, "/shared/r");
    EXPECT_EQ(got.run_id, "job42");
    EXPECT_EQ(got.timeout, std::chrono::seconds(9));
  }
  auto error = [](std::vector<std::pair<std::string, std::string>> vars) {
    ScopedEnv env(std::move(vars));
    return testing::ErrorOf([] { (void)ProcessGroupFromEnv(); });
  };
  EXPECT_EQ(error({}),
            "[ProcessGroupFromEnv] EMBER_NUM_NODES is not set; tools/train/launch.sh sets it for "
            "each host");
  EXPECT_EQ(error({{"EMBER_NUM_NODES", "two"}}),
            "[ProcessGroupFromEnv] EMBER_NUM_NODES='two' is not a whole number");
  EXPECT_EQ(error({{"EMBER_NUM_NODES", "2"}, {"EMBER_NODE_RANK", "2"}}),
            "[ProcessGroupFromEnv] EMBER_NODE_RANK=2 of EMBER_NUM_NODES=2: expected 0 <= rank "
            "< nodes");
  EXPECT_THAT(error({{"EMBER_NUM_NODES", "2"}, {"EMBER_NODE_RANK", "1"}}),
              HasSubstr("EMBER_RENDEZVOUS is not set"));
  EXPECT_EQ(error({{"EMBER_NUM_NODES", "2"},
                   {"EMBER_NODE_RANK", "1"},
                   {"EMBER_RENDEZVOUS", "/r"},
                   {"EMBER_RUN_ID", "a/b"}}),
            "[ProcessGroupFromEnv] EMBER_RUN_ID='a/b' has a space or a slash");
}

using testing::Shell;

TEST(LaunchScriptTest, SetsTheVariablesAndRunsTheCommand) {
  const std::string script = EMBER_LAUNCH_SCRIPT;
  if (!std::filesystem::exists(script)) {
    GTEST_SKIP() << script << " is not here (a test binary copied away from its source tree)";
  }
  const auto [out, status] = Shell("bash " + script +
                                   " --nodes=4 --node_rank=3 --rendezvous=/shared/r "
                                   "--run_id=job7 --timeout_s=60 -- env");
  EXPECT_EQ(status, 0) << out;
  for (const char* line : {"EMBER_NUM_NODES=4", "EMBER_NODE_RANK=3", "EMBER_RENDEZVOUS=/shared/r",
                           "EMBER_RUN_ID=job7", "EMBER_RENDEZVOUS_TIMEOUT_S=60"}) {
    EXPECT_THAT(out, HasSubstr(line));
  }
  const auto [bad, bad_status] =
      Shell("SLURM_JOB_ID= bash " + script + " --nodes=2 --node_rank=0 --rendezvous=/r -- true");
  EXPECT_EQ(bad_status, 2);
  EXPECT_THAT(bad, HasSubstr("--run_id='' must be set (the same on every host)"));
  const auto [rank, rank_status] =
      Shell("bash " + script + " --nodes=2 --node_rank=2 --rendezvous=/r --run_id=x -- true");
  EXPECT_EQ(rank_status, 2);
  EXPECT_THAT(rank, HasSubstr("--node_rank=2 is not below --nodes=2"));
}

}  // namespace
}  // namespace ember::train
