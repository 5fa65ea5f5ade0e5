// activity_test — launcher/watch/activity.hpp: the idle clock restarts on CPU time, bytes,
// wake-ups or progress and runs on none of them; this process's own readings move when it
// works. The end-to-end case (a rank's main thread stopped outside MPI) is
// tests/scripts/stall_defaults.sh.
#include "launcher/watch/activity.hpp"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>

namespace dlh {
namespace {

ProcessActivity At(double cpu_s, uint64_t io_bytes = 0, uint64_t wakeups = 0) {
  ProcessActivity a;
  a.cpu_s = cpu_s;
  a.io_bytes = io_bytes;
  a.wakeups = wakeups;
  return a;
}

TEST(IdleClock, RunsWhileNothingMoves) {
  IdleClock c;
  c.Observe(100, At(1), 5);
  EXPECT_DOUBLE_EQ(c.idle_s(100), 0);
  c.Observe(106, At(1.01), 5);  // 0.01 s of CPU in 6 s: below 2%
  c.Observe(112, At(1.02, 100, 30), 5);
  EXPECT_DOUBLE_EQ(c.idle_s(112), 12);
}

TEST(IdleClock, RestartsOnCpuBytesWakeupsOrProgress) {
  IdleClock c;
  c.Observe(0, At(1), 0);
  c.Observe(6, At(1.2), 0);  // 0.2 s of CPU in 6 s
  EXPECT_DOUBLE_EQ(c.idle_s(6), 0);
  c.Observe(12, At(1.2, 8192), 0);
  EXPECT_DOUBLE_EQ(c.idle_s(12), 0);
  c.Observe(18, At(1.2, 8192, 600), 0);  // 100 wake-ups a second: a polling thread
  EXPECT_DOUBLE_EQ(c.idle_s(18), 0);
  c.Observe(24, At(1.2, 8192, 600), 1);  // a step, or an MPI call entered
  EXPECT_DOUBLE_EQ(c.idle_s(24), 0);
  c.Observe(30, At(1.2, 8192, 600), 1);
  EXPECT_DOUBLE_EQ(c.idle_s(30), 6);
}

TEST(ProcessActivity, CountsThisProcesssWork) {
  const ProcessActivity before = ReadProcessActivity(0);
  // 0.2 s of this thread's own CPU time, however long a loaded machine takes to give it.
  auto thread_cpu_s = [] {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
  };
  volatile double x = 0;
  const double start = thread_cpu_s();
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (thread_cpu_s() - start < 0.2 && std::chrono::steady_clock::now() < give_up)
    for (int i = 0; i < 10000; ++i) x = x + std::sqrt(x + 1);
  std::FILE* f = std::fopen("/proc/self/status", "r");
  char buffer[65536];
  while (f && std::fread(buffer, 1, sizeof buffer, f) > 0) {
  }
  if (f) std::fclose(f);
  const ProcessActivity after = ReadProcessActivity(0);
  EXPECT_GT(after.cpu_s, before.cpu_s + 0.1);
  EXPECT_GT(after.io_bytes, before.io_bytes);
  // Leaving this thread out leaves its work out.
  const pid_t me = pid_t(syscall(SYS_gettid));
  EXPECT_LT(ReadProcessActivity(me).cpu_s, after.cpu_s);
}

TEST(DescribeThreadState, SaysWhatAThreadDoes) {
  EXPECT_EQ(DescribeThreadState(pid_t(syscall(SYS_gettid))).rfind("running", 0), 0u);
  EXPECT_EQ(DescribeThreadState(0), "");
}

}  // namespace
}  // namespace dlh
