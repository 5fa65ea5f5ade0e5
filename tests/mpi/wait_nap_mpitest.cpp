// wait_nap_mpitest — a rank that waits in MPI for a peer busy elsewhere naps once it has
// waited a second (launcher/watch/wait_nap.hpp): Open MPI's polls reach dlh's sched_yield
// (mpi_main.cpp asks Open MPI to yield, as dlh-launch does on an oversubscribed node; the
// binary exports the symbol as dlh-launch does), and the wait still ends when the peer comes.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <thread>

#include "launcher/comm/mpi.hpp"
#include "launcher/watch/peer_watch.hpp"
#include "launcher/watch/wait_nap.hpp"
#include "tests/mpi/mpi_test_util.hpp"

namespace dlh {
namespace {

using test::Rank;
using test::Size;

TEST(WaitNap, ARankWaitingForABusyPeerNapsAfterASecond) {
  PeerWatchOptions options;
  options.rank = Rank();
  options.size = Size();
  options.host = "test";
  StartPeerWatch(options);
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(SecondsInPeerWait(), 0);  // not inside a call

  // Rank 0 waits in the barrier while the others work (sleep) outside MPI for 2.5 s.
  const int64_t before = WaitNapsTaken();
  const auto start = std::chrono::steady_clock::now();
  if (Rank() != 0) std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int64_t naps = WaitNapsTaken() - before;
  StopPeerWatch();

  if (Rank() == 0) {
    // Not 2.5: rank 0 may leave the first barrier well after its peers (4 ranks on 2 cores,
    // yielding); more than kNapAfterWaitS is all a nap needs.
    ASSERT_GE(waited, 1.5);
    // About a nap a millisecond after the first second; at most one a millisecond.
    EXPECT_GT(naps, 0) << "rank 0 waited " << waited << " s in MPI_Barrier without a nap";
    EXPECT_LE(naps, int64_t((waited - kNapAfterWaitS) * 1000) + 10);
  } else {
    EXPECT_EQ(naps, 0) << "a rank that did not wait napped";
  }
}

}  // namespace
}  // namespace dlh
