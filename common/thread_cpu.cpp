// DLH — the CPU time of the calling thread (thread_cpu.hpp).
#include "common/thread_cpu.hpp"

#include <sys/resource.h>
#include <sys/time.h>

namespace dlh {

CpuSeconds operator-(const CpuSeconds& a, const CpuSeconds& b) {
  return {a.user - b.user, a.system - b.system};
}

CpuSeconds ThisThreadCpu() {
  struct rusage usage {};
  // Cannot fail for RUSAGE_THREAD with a valid pointer; a zero reading would only make the
  // write look free, never fail it.
  getrusage(RUSAGE_THREAD, &usage);
  auto seconds = [](const timeval& t) { return double(t.tv_sec) + 1e-6 * double(t.tv_usec); };
  return {seconds(usage.ru_utime), seconds(usage.ru_stime)};
}

}  // namespace dlh
