// delayed_allreduce_mpitest — stale-synchronous training's sums (launcher/comm/delayed_allreduce)
// under mpirun (2, 3 and 4 ranks): steps posted and taken back oldest first, each with every
// rank's gradients summed and its control values summed and maxed, on the thread of their own
// (the MPI tests ask for MPI_THREAD_MULTIPLE, as dlh-launch train does); entries completed for
// a checkpoint; entries restored from one.
#include <gtest/gtest.h>
#include <mpi.h>

#include <vector>

#include "common/error.hpp"
#include "launcher/comm/delayed_allreduce.hpp"
#include "launcher/comm/mpi.hpp"
#include "tests/mpi/mpi_test_util.hpp"

namespace dlh {
namespace {

using test::Rank;
using test::Size;

TEST(DelayedAllreduce, StepsComeBackInOrderWithTheirSums) {
  const int r = Rank(), n = Size();
  const SumMaxAllreduce control(2, 1);
  DelayedAllreduce sums(MPI_COMM_WORLD, 5, &control);
  EXPECT_EQ(sums.threaded(), mpi::ThreadMultiple());
  // Three steps in flight: step s gives gradient values (r + 1) * (s + 1) * (i + 1), control
  // (r, 1) summed and the flag r == s % n maxed.
  for (int s = 0; s < 3; ++s) {
    std::vector<float> g(5);
    for (int i = 0; i < 5; ++i) g[size_t(i)] = float((r + 1) * (s + 1) * (i + 1));
    const double c[3] = {double(r), 1.0, r == s % n ? double(s + 10) : 0.0};
    sums.post(100 + s, g.data(), c);
  }
  EXPECT_EQ(sums.in_flight(), 3u);
  const float ranks = float(n * (n + 1) / 2);
  for (int s = 0; s < 3; ++s) {
    const DelayedAllreduce::Entry& e = sums.wait_oldest();
    EXPECT_EQ(e.step, 100 + s);
    EXPECT_TRUE(e.flags);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(e.gradients[size_t(i)], ranks * float((s + 1) * (i + 1)));
    EXPECT_EQ(e.control_sum[0], n * (n - 1) / 2.0);
    EXPECT_EQ(e.control_sum[1], double(n));
    EXPECT_EQ(e.control_sum[2], double(s + 10));
    sums.release_oldest();
  }
  EXPECT_EQ(sums.in_flight(), 0u);
}

// A checkpoint waits for everything in flight; a resume puts summed entries back, flags off.
TEST(DelayedAllreduce, CompleteAllAndRestore) {
  const int r = Rank(), n = Size();
  const SumMaxAllreduce control(1, 1);
  DelayedAllreduce sums(MPI_COMM_WORLD, 3, &control);
  for (int s = 0; s < 2; ++s) {
    const float g[3] = {1.0f, float(r), float(s)};
    const double c[2] = {0.5, double(r)};
    sums.post(s, g, c);
  }
  sums.complete_all();
  ASSERT_EQ(sums.entries().size(), 2u);
  for (const auto& e : sums.entries()) {
    EXPECT_EQ(e->gradients[0], float(n));
    EXPECT_EQ(e->gradients[1], float(n * (n - 1) / 2));
    EXPECT_EQ(e->control_sum[1], double(n - 1));
  }
  DelayedAllreduce restored(MPI_COMM_WORLD, 3, &control);
  restored.restore(7, {1.0f, 2.0f, 3.0f}, {4.0});
  const DelayedAllreduce::Entry& e = restored.wait_oldest();
  EXPECT_EQ(e.step, 7);
  EXPECT_FALSE(e.flags);
  EXPECT_EQ(e.gradients, (std::vector<float>{1.0f, 2.0f, 3.0f}));
  EXPECT_EQ(e.control_sum[0], 4.0);
  EXPECT_EQ(e.control_sum[1], 0.0);
  restored.release_oldest();
  EXPECT_THROW(restored.restore(8, {1.0f}, {}), Error);
}

}  // namespace
}  // namespace dlh
