// ENGINE_PROFILE / EngineOptions::profile_path: a Chrome trace with one span
// per op on the row of the thread that ran it, rows named after the threads.

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/engine.h"

namespace ember::engine {
namespace {

using ::testing::HasSubstr;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(ProfilerTest, WritesAChromeTraceOfEveryOpAtDestruction) {
  const std::string path = ::testing::TempDir() + "ember_profile_test.json";
  std::remove(path.c_str());
  {
    EngineOptions options;
    options.profile_path = path;
    auto engine = CreateEngine(options);
    VarHandle v = engine->NewVariable();
    for (int i = 0; i < 3; ++i) engine->PushSync([](RunContext) {}, {}, {v}, {.name = "step\"x"});
    engine->PushSync([](RunContext) {}, {v}, {},
                     {.prop = FnProperty::kCPUPrioritized, .name = "read"});
    engine->WaitForAll();
  }
  const std::string trace = ReadFile(path);
  EXPECT_THAT(trace, HasSubstr("\"traceEvents\""));
  EXPECT_THAT(trace, HasSubstr(R"("name":"step\"x")")) << "op names are escaped";
  EXPECT_THAT(trace, HasSubstr(R"("cat":"cpu/Normal")"));
  EXPECT_THAT(trace, HasSubstr(R"("cat":"cpu/CPUPrioritized")"));
  EXPECT_THAT(trace, HasSubstr(R"("args":{"name":"ember-cpu"})")) << "worker rows are named";
  EXPECT_THAT(trace, HasSubstr(R"("args":{"name":"ember-cpu-prio"})"));
  size_t spans = 0;
  for (size_t at = trace.find("\"ph\":\"X\""); at != std::string::npos;
       at = trace.find("\"ph\":\"X\"", at + 1)) {
    ++spans;
  }
  EXPECT_EQ(spans, 4u) << "3 steps and 1 read";
}

}  // namespace
}  // namespace ember::engine
