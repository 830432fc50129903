#include "tools/bench/common/process_usage.h"

#include <sys/resource.h>

#include <initializer_list>

namespace ember::bench {
namespace {

double Seconds(const timeval& t) {
  return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec);
}

}  // namespace

ProcessUsage ProcessUsage::Now() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return {Seconds(usage.ru_utime), Seconds(usage.ru_stime), static_cast<double>(usage.ru_nvcsw),
          static_cast<double>(usage.ru_nivcsw)};
}

ProcessUsage ProcessUsage::operator-(const ProcessUsage& earlier) const {
  return {user_s - earlier.user_s, sys_s - earlier.sys_s,
          voluntary_switches - earlier.voluntary_switches,
          involuntary_switches - earlier.involuntary_switches};
}

double OwnAndChildrenCpuSeconds() {
  double seconds = 0;
  for (int who : {RUSAGE_SELF, RUSAGE_CHILDREN}) {
    rusage usage{};
    getrusage(who, &usage);
    seconds += Seconds(usage.ru_utime) + Seconds(usage.ru_stime);
  }
  return seconds;
}

}  // namespace ember::bench
