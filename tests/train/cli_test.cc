// The command lines (tools/ember_train.cc, tools/ember_stress.cc): bad input
// is refused before any work starts, with a message that names the flag or
// variable and exit status 2; a small run completes with its summary, JSON
// and trace; Ctrl-C finishes the step in flight, checkpoints, prints the
// summary and exits 0. The binaries are run as child processes.

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tools/train/json.h"

namespace ember::train::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

struct Outcome {
  int status = -1;     // the exit status, or -1 when killed by a signal
  std::string output;  // stdout and stderr together
};

// A running tool whose output is read line by line.
class Child {
 public:
  Child(const std::string& binary, const std::vector<std::string>& args,
        const std::vector<std::pair<std::string, std::string>>& env) {
    int fds[2];
    if (::pipe(fds) != 0) std::abort();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(fds[1], 1);
      ::dup2(fds[1], 2);
      ::close(fds[0]);
      ::close(fds[1]);
      for (const auto& [name, value] : env) ::setenv(name.c_str(), value.c_str(), 1);
      std::vector<char*> argv{const_cast<char*>(binary.c_str())};
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(binary.c_str(), argv.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    fd_ = fds[0];
  }

  // Reads until `text` appears in the output (true) or it ends (false).
  bool ReadUntil(const std::string& text) {
    while (output_.find(text) == std::string::npos) {
      if (!ReadSome()) return false;
    }
    return true;
  }
  void Signal(int sig) const { ::kill(pid_, sig); }
  pid_t pid() const { return pid_; }

  Outcome Finish() {
    while (ReadSome()) {
    }
    ::close(fd_);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output_};
  }

 private:
  bool ReadSome() {
    char buffer[4096];
    const ssize_t n = ::read(fd_, buffer, sizeof(buffer));
    if (n <= 0) return false;
    output_.append(buffer, static_cast<std::size_t>(n));
    return true;
  }

  pid_t pid_ = -1;
  int fd_ = -1;
  std::string output_;
};

Outcome RunTool(const std::string& binary, const std::vector<std::string>& args,
                const std::vector<std::pair<std::string, std::string>>& env = {}) {
  return Child(binary, args, env).Finish();
}

// A small CPU run: seconds, not the preset's minute.
std::vector<std::string> Small(std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"--device=cpu", "--tables=3", "--rows=2000",     "--dim=8",
                                   "--batch=64",   "--steps=20", "--bottom_mlp=16", "--top_mlp=16"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::string TempDir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

struct BadCase {
  const char* binary;  // "train" or "stress"
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;
  const char* message;
};

void PrintTo(const BadCase& c, std::ostream* os) {
  *os << c.binary;
  for (const std::string& a : c.args) *os << " " << a;
  for (const auto& [k, v] : c.env) *os << " " << k << "=" << v;
}

class BadInputTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadInputTest, IsRefusedBeforeAnyWorkWithExitStatus2) {
  const BadCase& c = GetParam();
  const std::string binary = std::string(c.binary) == "train" ? EMBER_TRAIN_BIN : EMBER_STRESS_BIN;
  const Outcome out = RunTool(binary, c.args, c.env);
  EXPECT_EQ(out.status, 2) << out.output;
  EXPECT_THAT(out.output, HasSubstr(c.message));
  // Refused before any work: no step, no engine run.
  EXPECT_THAT(out.output, ::testing::Not(HasSubstr("step 1")));
  EXPECT_THAT(out.output, ::testing::Not(HasSubstr("ops/s")));
}

INSTANTIATE_TEST_SUITE_P(
    Train, BadInputTest,
    ::testing::Values(
        BadCase{"train", {"--steps=-3"}, {}, "--steps=-3 is out of range"},
        BadCase{"train", {"--batch=0"}, {}, "--batch=0 is out of range"},
        BadCase{"train", {"--tables=100000"}, {}, "--tables=100000 is out of range"},
        BadCase{"train", {"--rows=lots"}, {}, "--rows='lots': 'lots' is not a count"},
        BadCase{
            "train", {"--rows=10,20", "--tables=3"}, {}, "--rows lists 2 tables but --tables=3"},
        BadCase{"train", {"--dim=0"}, {}, "--dim=0 is out of range"},
        BadCase{"train", {"--pooling=0.5"}, {}, "--pooling=0.5 is out of range"},
        BadCase{"train", {"--load_factor=2"}, {}, "--load_factor=2 is out of range"},
        BadCase{"train", {"--device=cpu", "--cache_bytes=100"}, {}, "smaller than one cache set"},
        BadCase{"train", {"--device=gpu:7"}, {}, "--device=gpu:7: no such GPU"},
        BadCase{"train", {"--device=tpu"}, {}, "--device='tpu' is not a device"},
        BadCase{"train",
                {"--device=cpu", "--rows=1000000000000", "--tables=26", "--dim=1024"},
                {},
                "GiB of host memory (the tables' rows and optimizer state"},
        // Shapes and budgets that no memory holds: refused before the
        // allocations that would find them.
        BadCase{"train",
                {"--device=cpu", "--top_mlp=1048576,1048576"},
                {},
                "dense parameters, gradients and optimizer state 12288.6 GiB"},
        BadCase{"train",
                {"--device=cpu", "--batch=16000000", "--bottom_mlp=1048576"},
                {},
                "a batch's activations and gradients"},
        BadCase{"train",
                {"--device=cpu", "--batch=1000000", "--pooling=30000"},
                {},
                "the loader's 5 batches 8941.3 GiB"},
        BadCase{"train", {"--pooling=40000"}, {}, "--pooling=40000 is out of range [1, 32768]"},
        BadCase{"train",
                {"--device=cpu", "--cache_bytes=1000000000000000"},
                {},
                "the cache 931322.6 GiB); this machine has"},
        BadCase{"train", {"--schedule=fast"}, {}, "unknown schedule 'fast'; valid: baseline"},
        BadCase{"train", {"--optimizer=lion"}, {}, "unknown optimizer 'lion'"},
        BadCase{"train", {"--policy=fifo"}, {}, "--policy='fifo' is not lru or lfu"},
        BadCase{"train", {"--home=disk"}, {}, "--home='disk' is not auto, managed or mapped"},
        BadCase{"train", {"--mapped_fills=dma"}, {}, "--mapped_fills='dma' is not warps or copy"},
        BadCase{"train", {"--fill_threads=0"}, {}, "--fill_threads=0 is out of range [1, 64]"},
        BadCase{"train",
                {"--trace=/nonexistent-dir/t.json"},
                {},
                "--trace '/nonexistent-dir/t.json': cannot be written"},
        BadCase{"train",
                {"--json=/nonexistent-dir/r.json"},
                {},
                "--json '/nonexistent-dir/r.json': cannot be written"},
        BadCase{"train",
                {"--checkpoint_dir=/proc/ember-ckpt"},
                {},
                "--checkpoint_dir '/proc/ember-ckpt': cannot be created"},
        BadCase{"train", {"--checkpoint_every=10"}, {}, "need --checkpoint_dir"},
        BadCase{"train", {"--device=cpu", "--steps=0"}, {}, "the run needs an end: --steps=0"},

        BadCase{"train",
                {"--data=criteo:/nonexistent.tsv"},
                {},
                "'/nonexistent.tsv' is not a readable file"},
        BadCase{"train", {"--data=parquet:x"}, {}, "is not a data source"},
        BadCase{
            "train", {"--compare", "--checkpoint_dir=/tmp"}, {}, "--compare runs every schedule"},
        BadCase{
            "train", {"--gpus=2"}, {}, "--gpus=2: --plan prints how the tables would be sharded"},
        BadCase{"train", {"--plan", "--gpus=2", "--gpu_memory=-1"}, {}, "--gpu_memory=-1"},
        BadCase{
            "train", {"--ranks=3", "--batch=256"}, {}, "--batch=256 does not split over 3 ranks"},
        BadCase{"train",
                {"--ranks=2", "--schedule=prefetch"},
                {},
                "unknown schedule 'prefetch'; valid: baseline, sparse-dist, fused, semisync"},
        BadCase{
            "train", {"--ranks=2", "--eval_every=5"}, {}, "--ranks trains and reports the loss"},
        BadCase{"train", {"--check_unsharded"}, {}, "--check_unsharded compares a run of --ranks"},
        BadCase{"train", {"--plan", "--sharding=column"}, {}, "unknown sharding 'column'"},
        BadCase{"train",
                {"--plan", "--gpus=2", "--gpu_memory=1000000", "--tables=3", "--shard_plan=0:0"},
                {},
                "[ParseShardPlan] table 1 is not placed"},
        BadCase{"train",
                {"--plan", "--gpus=2", "--gpu_memory=1000", "--sharding=table"},
                {},
                "fits on no GPU table-wise"},
        BadCase{"train", {}, {{"EMBER_LOG_LEVEL", "loud"}}, "EMBER_LOG_LEVEL"},
        BadCase{"train",
                {"--device=cpu"},
                {{"EMBER_NUM_NODES", "2"},
                 {"EMBER_NODE_RANK", "0"},
                 {"EMBER_RENDEZVOUS", "/tmp/ember-cli-test.rdv"},
                 {"EMBER_RUN_ID", "cli"}},
                "a run of several hosts (tools/train/launch.sh) trains on GPUs"},
        BadCase{"train", {}, {{"EMBER_NUM_NODES", "2"}}, "EMBER_NODE_RANK"},
        BadCase{"train", {}, {{"ENGINE_TYPE", "FastEngine"}}, "NaiveEngine"},
        BadCase{"train",
                {},
                {{"ENGINE_PROFILE", "/nonexistent-dir/p.json"}},
                "ENGINE_PROFILE '/nonexistent-dir/p.json': cannot be written"},
        BadCase{"stress", {"--ops=-5"}, {}, "--ops=-5 is out of range"},
        BadCase{"stress", {"--push_threads=0"}, {}, "--push_threads=0 is out of range"},
        BadCase{"stress",
                {"--vars=4", "--push_threads=8"},
                {},
                "--push_threads=8 is out of range [1, 4]"},
        BadCase{"stress", {"--sleep_probability=2"}, {}, "--sleep_probability=2"},
        BadCase{"stress", {"--ops=100"}, {{"EMBER_LOG_LEVEL", "loud"}}, "EMBER_LOG_LEVEL"},
        BadCase{"stress",
                {"--ops=100"},
                {{"ENGINE_PROFILE", "/nonexistent-dir/p.json"}},
                "ENGINE_PROFILE '/nonexistent-dir/p.json': cannot be written"}));

// Criteo data brings no held-out set of its own: an evaluation asked for
// without --eval_data would silently never run.
TEST(CliTest, EvalEveryWithoutHeldOutDataIsRefused) {
  const std::string dir = TempDir("ember_cli_eval");
  const std::string log = dir + "/day.tsv";
  std::ofstream(log) << "1" << std::string(13, '\t') << std::string(26, '\t') << "\n";
  const Outcome out = RunTool(
      EMBER_TRAIN_BIN, {"--device=cpu", "--data=criteo:" + log, "--tables=26", "--eval_every=10"});
  EXPECT_EQ(out.status, 2) << out.output;
  EXPECT_THAT(out.output, HasSubstr("--eval_every=10 needs held-out data: --eval_data"));
  fs::remove_all(dir);
}

// A data file that is not of its format at all (another file named by
// mistake) is refused before any work, naming the file, the line and the
// field, for the training and the held-out data and both formats; a bad
// line further on is found where the run reaches it (exit 1, the step).
TEST(CliTest, DataFilesThatAreNotCriteoAreRefusedBeforeAnyWork) {
  const std::string dir = TempDir("ember_cli_bad_data");
  const std::string good_line = "1" + std::string(13, '\t') + std::string(26, '\t') + "\n";
  const std::string good = dir + "/good.tsv";
  std::ofstream(good) << good_line << good_line;
  const std::string text = dir + "/notes.txt";
  std::ofstream(text) << "hello world\n" << good_line;
  const std::string binary = dir + "/day.bin";
  std::ofstream(binary) << std::string(200, 'x');
  const std::string later = dir + "/later.tsv";
  std::ofstream(later) << good_line << good_line << "1\tzz\n";
  const std::vector<std::string> shape = {"--device=cpu", "--tables=26", "--rows=1000",
                                          "--dim=8",      "--batch=2",   "--steps=4"};
  const struct {
    std::vector<std::string> args;
    std::string message;
  } cases[] = {
      {{"--data=criteo:" + good + "," + text}, text + ":1: has 1 field; a Criteo line has 40"},
      {{"--data=criteo:" + good, "--eval_data=criteo:" + text}, text + ":1: has 1 field"},
      {{"--data=criteo-bin:" + binary}, binary + ": bad magic"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = shape;
    args.insert(args.end(), c.args.begin(), c.args.end());
    const Outcome out = RunTool(EMBER_TRAIN_BIN, args);
    EXPECT_EQ(out.status, 2) << out.output;
    EXPECT_THAT(out.output, HasSubstr(c.message));
    EXPECT_THAT(out.output, ::testing::Not(HasSubstr("engine ")));
  }
  std::vector<std::string> args = shape;
  args.push_back("--data=criteo:" + later);
  const Outcome out = RunTool(EMBER_TRAIN_BIN, args);
  EXPECT_EQ(out.status, 1) << out.output;
  EXPECT_THAT(out.output, HasSubstr(later + ":3: has 2 fields"));
  fs::remove_all(dir);
}

// The data's short last batch cannot be split into whole local batches: a
// sharded run drops it (TorchRec's drop_last) on every rank, and says so.
TEST(CliTest, RanksDropTheShortLastBatch) {
  const Outcome out =
      RunTool(EMBER_TRAIN_BIN, {"--device=cpu", "--ranks=2", "--tables=4", "--rows=500",
                                "--batch=64", "--examples=1000", "--steps=0", "--log_every=4"});
  ASSERT_EQ(out.status, 0) << out.output;
  EXPECT_THAT(out.output, HasSubstr("the data's last batch holds 40 of 64 examples: dropped"));
  EXPECT_THAT(out.output, HasSubstr("15 steps, 960 examples"));
}

TEST(CliTest, ResumeWithoutACheckpointIsRefused) {
  const std::string dir = TempDir("ember_cli_resume");
  const Outcome out = RunTool(EMBER_TRAIN_BIN, Small({"--checkpoint_dir=" + dir, "--resume"}));
  EXPECT_EQ(out.status, 2) << out.output;
  EXPECT_THAT(out.output, HasSubstr("--resume: there is no checkpoint in"));
  fs::remove_all(dir);
}

TEST(CliTest, PlanPrintsTheShardPlanAndExits) {
  const Outcome out =
      RunTool(EMBER_TRAIN_BIN, {"--device=cpu", "--plan", "--gpus=4", "--gpu_memory=1000000000",
                                "--tables=5", "--rows=4000000,1000,1000,1000,1000"});
  ASSERT_EQ(out.status, 0) << out.output;
  EXPECT_THAT(out.output, HasSubstr("over 4 GPU(s), the planner's plan"));
  EXPECT_THAT(out.output, HasSubstr("plan: 0:row,1:0,2:1,3:2,4:3"));
  EXPECT_THAT(out.output, HasSubstr("imbalance (busiest GPU / mean)"));
  const Outcome given =
      RunTool(EMBER_TRAIN_BIN, {"--device=cpu", "--plan", "--gpus=2", "--gpu_memory=1000000000",
                                "--tables=2", "--shard_plan=1:0,0:row"});
  ASSERT_EQ(given.status, 0) << given.output;
  EXPECT_THAT(given.output, HasSubstr("plan: 0:row,1:0"));
}

// Sharded training on the CPU, checked against one process on the same
// data: every value bit for bit with table-wise shards (the cache on each
// rank evicting: 4 tables of 500 rows, a fifth of them cached).
TEST(CliTest, RanksTrainShardedAndMatchOneProcess) {
  for (const char* schedule : {"sparse-dist", "fused", "semisync"}) {
    const Outcome out =
        RunTool(EMBER_TRAIN_BIN, {"--device=cpu", "--ranks=2", "--tables=4", "--rows=500",
                                  "--batch=64", "--steps=12", "--log_every=4", "--check_unsharded",
                                  std::string("--schedule=") + schedule});
    ASSERT_EQ(out.status, 0) << out.output;
    EXPECT_THAT(out.output, HasSubstr("sharded over 2 ranks on the CPU, plan "));
    EXPECT_THAT(out.output, HasSubstr("step 12: loss "));
    EXPECT_THAT(out.output, HasSubstr("against one process (dense gradients in 2 slices): "
                                      "identical: "))
        << schedule;
  }
}

TEST(CliTest, ASmallRunPrintsItsSummaryJsonAndTrace) {
  const std::string dir = TempDir("ember_cli_run");
  const std::string json = dir + "/run.json", trace = dir + "/trace.json";
  const Outcome out =
      RunTool(EMBER_TRAIN_BIN,
              Small({"--json=" + json, "--trace=" + trace, "--trace_steps=4", "--log_every=5"}));
  ASSERT_EQ(out.status, 0) << out.output;
  for (const char* part : {"step 5/20  loss", "ex/s  cache hit",
                           "== ember-train summary ==", "step time  P50", "held-out   loss", "AUC",
                           "cache      hit rate", "memory     host: allocated", "trace      "}) {
    EXPECT_THAT(out.output, HasSubstr(part));
  }
  std::stringstream text;
  text << std::ifstream(json).rdbuf();
  const Json report = Json::Parse(text.str());
  EXPECT_EQ(report["run"]["steps"].number(), 20);
  EXPECT_EQ(report["run"]["step_losses"].array().size(), 20u);
  EXPECT_GT(report["run"]["p50_step_ms"].number(), 0);
  EXPECT_EQ(report["run"]["trace"]["steps"].number(), 4);
  EXPECT_TRUE(fs::exists(trace));
  fs::remove_all(dir);
}

// Without --trace, each run's traces go to a directory of its own: two
// runs at once used to share one directory and read each other's
// half-written traces.
TEST(CliTest, ComparesAtOnceKeepTheirTracesApart) {
  const std::vector<std::string> args = Small({"--compare", "--steps=12", "--trace_steps=2"});
  Child first(EMBER_TRAIN_BIN, args, {});
  Child second(EMBER_TRAIN_BIN, args, {});
  for (Child* child : {&first, &second}) {
    const pid_t pid = child->pid();
    const Outcome out = child->Finish();
    ASSERT_EQ(out.status, 0) << out.output;
    EXPECT_THAT(out.output, HasSubstr("semisync"));
    const fs::path dir = fs::temp_directory_path() / ("ember-train-" + std::to_string(pid));
    for (const char* schedule : {"baseline", "prefetch", "fused", "semisync"}) {
      EXPECT_TRUE(fs::exists(dir / ("trace-" + std::string(schedule) + ".json"))) << dir;
    }
    fs::remove_all(dir);
  }
}

TEST(CliTest, CtrlCFinishesTheStepCheckpointsAndExitsZero) {
  const std::string dir = TempDir("ember_cli_stop");
  Child child(EMBER_TRAIN_BIN,
              Small({"--steps=100000", "--log_every=2", "--checkpoint_dir=" + dir}), {});
  ASSERT_TRUE(child.ReadUntil("step 4/"));
  child.Signal(SIGINT);
  const Outcome out = child.Finish();
  EXPECT_EQ(out.status, 0) << out.output;
  EXPECT_THAT(out.output, HasSubstr("stopped early"));
  EXPECT_THAT(out.output, HasSubstr("checkpoint after step"));
  EXPECT_THAT(out.output, HasSubstr("== ember-train summary =="));
  EXPECT_TRUE(fs::exists(dir + "/checkpoint.ember"));
  // And it resumes from there.
  const Outcome resumed =
      RunTool(EMBER_TRAIN_BIN, Small({"--steps=30", "--checkpoint_dir=" + dir, "--resume"}));
  EXPECT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_THAT(resumed.output, HasSubstr("to 30)"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ember::train::testing
