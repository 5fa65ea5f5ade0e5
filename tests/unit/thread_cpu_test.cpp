// DLH — tests of ThisThreadCpu: it counts the calling thread's work and no other thread's.
#include "common/thread_cpu.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace dlh {
namespace {

// Works on this thread until its own CPU clock has moved by `seconds`; returns the reading.
CpuSeconds BurnFor(double seconds) {
  const CpuSeconds start = ThisThreadCpu();
  volatile double sink = 0;
  CpuSeconds used;
  do {
    for (int i = 0; i < 100000; ++i) sink = sink + 1e-9 * i;
    used = ThisThreadCpu() - start;
  } while (used.total() < seconds);
  return used;
}

TEST(ThreadCpu, CountsThisThreadsWork) {
  const CpuSeconds used = BurnFor(0.02);
  EXPECT_GE(used.total(), 0.02);
  EXPECT_GT(used.user, 0);  // arithmetic runs in user space
  EXPECT_GE(used.system, 0);
}

TEST(ThreadCpu, LeavesOutOtherThreads) {
  const CpuSeconds before = ThisThreadCpu();
  CpuSeconds other;
  std::thread worker([&other] { other = BurnFor(0.2); });
  worker.join();  // this thread sleeps in join while the worker burns
  const CpuSeconds mine = ThisThreadCpu() - before;
  EXPECT_GE(other.total(), 0.2);
  EXPECT_LT(mine.total(), 0.1);
}

TEST(ThreadCpu, Arithmetic) {
  CpuSeconds a{1.5, 0.25};
  a += CpuSeconds{0.5, 0.25};
  EXPECT_DOUBLE_EQ(a.user, 2.0);
  EXPECT_DOUBLE_EQ(a.system, 0.5);
  EXPECT_DOUBLE_EQ(a.total(), 2.5);
  const CpuSeconds d = a - CpuSeconds{1, 0.5};
  EXPECT_DOUBLE_EQ(d.user, 1.0);
  EXPECT_DOUBLE_EQ(d.system, 0.0);
}

}  // namespace
}  // namespace dlh
