// DLH — the CPU time of the calling thread or process (thread_cpu.hpp).
#include "common/thread_cpu.hpp"

#include <sys/resource.h>
#include <sys/time.h>

namespace dlh {

CpuSeconds operator-(const CpuSeconds& a, const CpuSeconds& b) {
  return {a.user - b.user, a.system - b.system};
}

namespace {

// Cannot fail for these `who` with a valid pointer; a zero reading would only make the work
// look free, never fail it.
CpuSeconds Usage(int who) {
  struct rusage usage {};
  getrusage(who, &usage);
  auto seconds = [](const timeval& t) { return double(t.tv_sec) + 1e-6 * double(t.tv_usec); };
  return {seconds(usage.ru_utime), seconds(usage.ru_stime)};
}

}  // namespace

CpuSeconds ThisThreadCpu() { return Usage(RUSAGE_THREAD); }
CpuSeconds ThisProcessCpu() { return Usage(RUSAGE_SELF); }

}  // namespace dlh
