#include "tools/bench/common/machine_notes.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "tools/bench/common/json_writer.h"
#include "tools/bench/common/process_usage.h"

namespace ember::bench {
namespace {

// The first "model name" line of /proc/cpuinfo (x86; other CPUs may lack
// it).
std::string ReadCpuModel() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("model name")) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    return std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
  }
  return "unknown CPU (no \"model name\" in /proc/cpuinfo)";
}

// CPU seconds the whole machine has been busy since boot (/proc/stat).
double MachineBusySeconds() {
  std::FILE* file = std::fopen("/proc/stat", "r");
  if (file == nullptr) return NAN;
  unsigned long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0;
  const int fields = std::fscanf(file, "cpu %llu %llu %llu %llu %llu %llu %llu", &user, &nice,
                                 &system, &idle, &iowait, &irq, &softirq);
  std::fclose(file);
  if (fields != 7) return NAN;
  return static_cast<double>(user + nice + system + irq + softirq) /
         static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace

MachineInfo MachineInfo::Read() {
  MachineInfo info;
  info.cpu_model = ReadCpuModel();
  info.hardware_threads = std::thread::hardware_concurrency();
  double load[1] = {NAN};
  info.load_average = getloadavg(load, 1) == 1 ? load[0] : NAN;
  return info;
}

std::string MachineInfo::Note() const {
  return absl::StrFormat("CPU: %s, %d hardware threads, load average %.2f at start", cpu_model,
                         hardware_threads, load_average);
}

std::string MachineInfo::Json() const {
  return JsonObject()
      .Add("cpu_model", JsonString(cpu_model))
      .Add("hardware_threads", JsonNumber(hardware_threads))
      .Add("load_average", JsonNumber(load_average))
      .Render();
}

OtherProcessesMeter::OtherProcessesMeter()
    : machine_start_(MachineBusySeconds()),
      own_start_(OwnAndChildrenCpuSeconds()),
      start_(std::chrono::steady_clock::now()) {}

double OtherProcessesMeter::Share() const {
  const double others =
      (MachineBusySeconds() - machine_start_) - (OwnAndChildrenCpuSeconds() - own_start_);
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  return std::clamp(others / (wall * std::thread::hardware_concurrency()), 0.0, 1.0);
}

std::string OtherProcessesMeter::Note(std::string_view who) const {
  const double share = Share();
  if (std::isnan(share)) return "other processes' CPU use during the runs: unknown";
  if (share > 0.05) {
    absl::FPrintF(stderr, "[%s] WARNING: other processes used %.0f%% of the CPUs\n", who,
                  100 * share);
  }
  return absl::StrFormat("other processes used %.1f%% of the CPUs during the runs", 100 * share);
}

}  // namespace ember::bench
