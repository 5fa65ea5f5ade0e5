// tcp_eager_mpitest — launcher/comm/tcp_eager.hpp against Open MPI itself: the eager limit
// dlh-launch sets in its own environment before MPI_Init is the one the TCP transport reads
// (mpi_main.cpp sets it as dlh-launch train does), and a limit the environment brought is left
// as it was. What the limit buys between hosts is measured, not tested: share/bench/local_sgd.sh.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <string>

#include "launcher/comm/tcp_eager.hpp"

namespace dlh {
namespace {

#ifdef OPEN_MPI
TEST(TcpEager, OpenMpiReadsTheLimitSetBeforeItsInit) {
  const size_t in_effect = TcpEagerLimitInEffect();
  ASSERT_GT(in_effect, 0u) << "MPI_T does not show btl_tcp_eager_limit";
  if (TcpEagerLimitRaised() > 0) {
    EXPECT_EQ(in_effect, (size_t(4) << 20) + kTcpEagerHeaderRoom);  // the 4 MiB default bucket
    EXPECT_EQ(in_effect, TcpEagerLimitRaised());
  } else {  // the environment brought its own: left alone, and read as it was
    const char* given = std::getenv("OMPI_MCA_btl_tcp_eager_limit");
    ASSERT_NE(given, nullptr);
    EXPECT_EQ(std::to_string(in_effect), given);
  }
}
#endif

}  // namespace
}  // namespace dlh
