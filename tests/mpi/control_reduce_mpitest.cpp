// control_reduce_mpitest — the trainer's one control allreduce (launcher/comm/control_reduce)
// under mpirun (2, 3 and 4 ranks): the first values summed, the rest maxed, in one message,
// with negative flags (no checkpoint written: -1), whole numbers past 2^31, several layouts
// alive at once, and every rank getting the same bits.
#include <gtest/gtest.h>
#include <mpi.h>

#include <vector>

#include "launcher/comm/control_reduce.hpp"
#include "tests/mpi/mpi_test_util.hpp"

namespace dlh {
namespace {

using test::Rank;
using test::Size;

TEST(SumMaxAllreduce, SumsThenMaxes) {
  const int r = Rank(), n = Size();
  const SumMaxAllreduce reduce(3, 4);
  ASSERT_EQ(reduce.size(), 7u);
  // Sums: r + 0.5, 1, and a value only one rank has. Maxes: one rank's signal, -1 on all but
  // the last (a checkpoint step), a large step number, and a flag no rank raises.
  const std::vector<double> in = {
      r + 0.5,          1.0, r == 1 ? 7.0 : 0.0, r == 0 ? 3.0 : 0.0, r == n - 1 ? 5e9 : -1.0,
      double(r) * 1e10, 0.0};
  std::vector<double> out(7, -42.0);
  reduce.run(in.data(), out.data(), MPI_COMM_WORLD);
  EXPECT_EQ(out[0], n * (n - 1) / 2.0 + 0.5 * n);
  EXPECT_EQ(out[1], double(n));
  EXPECT_EQ(out[2], 7.0);
  EXPECT_EQ(out[3], 3.0);
  EXPECT_EQ(out[4], 5e9);
  EXPECT_EQ(out[5], double(n - 1) * 1e10);
  EXPECT_EQ(out[6], 0.0);
}

// Two layouts alive at once (the trainer's and, say, lr-find's) each reduce by their own.
TEST(SumMaxAllreduce, LayoutsDoNotMix) {
  const int r = Rank(), n = Size();
  const SumMaxAllreduce all_sum(2, 0), all_max(0, 2);
  const double in[2] = {double(r), -double(r)};
  double sum[2], max[2];
  all_sum.run(in, sum, MPI_COMM_WORLD);
  all_max.run(in, max, MPI_COMM_WORLD);
  EXPECT_EQ(sum[0], n * (n - 1) / 2.0);
  EXPECT_EQ(sum[1], -n * (n - 1) / 2.0);
  EXPECT_EQ(max[0], double(n - 1));
  EXPECT_EQ(max[1], 0.0);
}

// Sums of values that round differently by order: every rank must still get the same bits
// (the trainer's batch-norm statistics must stay identical on every rank).
TEST(SumMaxAllreduce, EveryRankGetsTheSameBits) {
  const int r = Rank();
  const SumMaxAllreduce reduce(64, 1);
  std::vector<double> in(65), out(65);
  for (size_t i = 0; i < 64; ++i) in[i] = 1.0 / double(3 + i + 7 * r) * (r % 2 ? 1e8 : 1e-8);
  in[64] = r;
  reduce.run(in.data(), out.data(), MPI_COMM_WORLD);
  std::vector<double> root = out;
  MPI_Bcast(root.data(), 65, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  EXPECT_EQ(out, root);
}

}  // namespace
}  // namespace dlh
