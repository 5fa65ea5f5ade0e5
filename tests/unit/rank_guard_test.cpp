// The guard's line for a rank that died (launcher/watch/rank_guard.hpp); the guard itself runs
// in tests/scripts/stall.sh (mpirun) and tests/slurm/faults_test.sh (srun).
#include "launcher/watch/rank_guard.hpp"

#include <gtest/gtest.h>

#include <csignal>

namespace dlh {
namespace {

TEST(RankDeathLine, NamesRankHostPidSignalStepAndCheckpoint) {
  EXPECT_EQ(
      RankDeathLine(2, 4, "host2", 4711, SIGKILL, false, 1800, "run/checkpoints/ckpt-000001800.h5"),
      "dlh-launch [rank 2/4 host2]: error: rank 2 (pid 4711) was killed by SIGKILL at step "
      "1800 (by hand, or by the kernel's out-of-memory killer); last good checkpoint "
      "run/checkpoints/ckpt-000001800.h5; its peers cannot go on without it: the job ends");
}

TEST(RankDeathLine, CrashBeforeTrainingWithoutCheckpoint) {
  EXPECT_EQ(RankDeathLine(0, 1, "n1", 7, SIGSEGV, true, -1, ""),
            "dlh-launch [rank 0/1 n1]: error: rank 0 (pid 7) crashed with SIGSEGV (core dumped) "
            "before training started; no checkpoint yet; its peers cannot go on without it: the "
            "job ends");
}

TEST(RankDeathLine, UnnamedSignalByNumber) {
  EXPECT_NE(
      RankDeathLine(1, 2, "h", 9, 40, false, 3, "").find("was killed by signal 40 at step 3;"),
      std::string::npos);
}

}  // namespace
}  // namespace dlh
