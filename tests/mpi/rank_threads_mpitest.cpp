// rank_threads_mpitest — a rank's default CPU engine threads (launcher/watch/rank_threads.hpp)
// under mpirun, with the ranks' affinity masks set by the test: every rank on every CPU (the
// ranks share the node's CPUs), then each on one CPU (the ranks bound apart, several to a CPU
// where there are more ranks than CPUs).
#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <thread>

#include "launcher/watch/rank_threads.hpp"
#include "tests/mpi/mpi_test_util.hpp"

namespace dlh {
namespace {

using test::Rank;
using test::Size;

// Sets this process's affinity mask for the test's life, then puts the old one back.
class ScopedAffinity {
 public:
  explicit ScopedAffinity(const cpu_set_t& mask) {
    ok_ = sched_getaffinity(0, sizeof saved_, &saved_) == 0 &&
          sched_setaffinity(0, sizeof mask, &mask) == 0;
  }
  ~ScopedAffinity() { sched_setaffinity(0, sizeof saved_, &saved_); }
  bool ok() const { return ok_; }

 private:
  cpu_set_t saved_;
  bool ok_ = false;
};

int Online() { return std::max(1, int(std::thread::hardware_concurrency())); }

TEST(RankThreads, RanksOnEveryCpuShareThem) {
  cpu_set_t all;
  CPU_ZERO(&all);
  for (int c = 0; c < Online(); ++c) CPU_SET(c, &all);
  const ScopedAffinity scoped(all);
  ASSERT_TRUE(scoped.ok());
  const RankThreads t = DefaultRankThreads(MPI_COMM_WORLD);
  EXPECT_EQ(t.cpus, Online());
  EXPECT_EQ(t.sharing, Size());  // one node: every rank has this mask
  EXPECT_EQ(t.threads, std::max(1, Online() / Size()));
}

TEST(RankThreads, RanksBoundApartOwnTheirCpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  const int cpu = Rank() % Online();
  CPU_SET(cpu, &one);
  const ScopedAffinity scoped(one);
  ASSERT_TRUE(scoped.ok());
  const RankThreads t = DefaultRankThreads(MPI_COMM_WORLD);
  EXPECT_EQ(t.cpus, 1);
  int same = 0;  // the ranks the test put on this rank's CPU
  for (int r = 0; r < Size(); ++r) same += r % Online() == cpu;
  EXPECT_EQ(t.sharing, same);
  EXPECT_EQ(t.threads, 1);
  if (Online() > 1) {
    EXPECT_NE(RankThreadsText(t).find("1 CPU(s) in the rank's affinity mask (of the node's " +
                                      std::to_string(Online()) + ")"),
              std::string::npos)
        << RankThreadsText(t);
  }
}

}  // namespace
}  // namespace dlh
