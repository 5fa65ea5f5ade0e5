// DLH — GoogleTest main for tests that run under mpirun: MPI is initialised once, only
// rank 0 prints results, and every rank exits with the worst result of any rank.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "launcher/comm/tcp_eager.hpp"

namespace {
// Ranks other than 0 report only their failures, each line tagged with the rank. The test's
// name is kept from its start: gtest reports an exception thrown by a test body while it
// holds the lock that current_test_info() takes, which deadlocked the rank.
class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestStart(const ::testing::TestInfo& test) override {
    test_ = std::string(test.test_suite_name()) + "." + test.name();
  }
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "rank %d: %s: %s:%d: %s\n", rank_, test_.c_str(),
                 r.file_name() ? r.file_name() : "?", r.line_number(), r.summary());
  }

 private:
  int rank_;
  std::string test_;
};
}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  // As dlh-launch train does before MPI_Init (tcp_eager_mpitest.cpp reads it back).
  dlh::RaiseTcpEagerLimit(dlh::BucketBytesFromArguments(argc, argv));
  // As dlh-launch asks on an oversubscribed node (core_yield.hpp), unless the caller said
  // otherwise: waiting ranks yield, and wait_nap_mpitest.cpp times their naps.
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
  // As dlh-launch train asks (mpi::Env): stale-synchronous training's sums run on a thread.
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(rank));
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0, any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any;
}
