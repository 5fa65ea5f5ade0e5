// ring_sum_mpitest — the stale-synchronous thread's ring sum (launcher/comm/ring_sum) under
// mpirun (2, 3 and 4 ranks): exact sums for every length around the rank count (segments of
// unequal and of no length, and of one piece, two, or a value either side), the same bits on every
// rank, and several sums one after another on one communicator.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "launcher/comm/ring_sum.hpp"
#include "tests/mpi/mpi_test_util.hpp"

namespace dlh {
namespace {

using test::Rank;
using test::Size;

void Sum(RingSum* ring, std::vector<float>* v) {
  ring->start(v->data(), v->size());
  while (!ring->test()) std::this_thread::sleep_for(std::chrono::microseconds(50));
}

TEST(RingSum, ExactSumsForEveryLengthAroundTheRankCount) {
  const int r = Rank(), n = Size();
  RingSum ring(MPI_COMM_WORLD);
  for (size_t count : {size_t(0), size_t(1), size_t(n - 1), size_t(n), size_t(n + 1),
                       size_t(3 * n + 2), size_t(100003),
                       // segments of exactly 1 and 2 pieces, and a value either side
                       n * RingSum::kPieceValues - 1, n * RingSum::kPieceValues,
                       n * RingSum::kPieceValues + 1, 2 * n * RingSum::kPieceValues}) {
    // Small integers: every partial sum is exact in float, so any order gives these values.
    std::vector<float> v(count);
    for (size_t i = 0; i < count; ++i) v[i] = float((r + 1) * int(i % 7 + 1));
    Sum(&ring, &v);
    const float ranks = float(n * (n + 1) / 2);
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(v[i], ranks * float(i % 7 + 1)) << "count " << count << ", value " << i;
  }
}

// Values whose sum depends on the order: every rank must still end with the same bits, and
// the sum is within float rounding of MPI_Allreduce's.
TEST(RingSum, EveryRankEndsWithTheSameBits) {
  const int r = Rank();
  const size_t count = 4099;
  std::vector<float> v(count), reference(count);
  for (size_t i = 0; i < count; ++i) v[i] = 1.0f / float(3 + r) + 1e-3f * float(i) / float(7 + r);
  MPI_Allreduce(v.data(), reference.data(), int(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  RingSum ring(MPI_COMM_WORLD);
  Sum(&ring, &v);
  std::vector<int32_t> bits(count), low(count), high(count);
  std::memcpy(bits.data(), v.data(), count * sizeof(float));
  MPI_Allreduce(bits.data(), low.data(), int(count), MPI_INT32_T, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(bits.data(), high.data(), int(count), MPI_INT32_T, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_EQ(low, high);
  for (size_t i = 0; i < count; ++i) ASSERT_NEAR(v[i], reference[i], 1e-5f * reference[i]) << i;
}

TEST(RingSum, SumsOneAfterAnotherOnOneCommunicator) {
  const int r = Rank(), n = Size();
  RingSum ring(MPI_COMM_WORLD);
  for (int s = 0; s < 5; ++s) {
    std::vector<float> v(size_t(17 + s), float(r + s));
    Sum(&ring, &v);
    for (float x : v) ASSERT_EQ(x, float(n * (n - 1) / 2 + n * s)) << "sum " << s;
  }
}

}  // namespace
}  // namespace dlh
