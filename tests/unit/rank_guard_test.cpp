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

// Before its first step the line says where the rank was: MPI_Init's own crashes read
// differently from the engine's.
TEST(RankDeathLine, CrashBeforeTrainingNamesThePhase) {
  EXPECT_NE(RankDeathLine(2, 4, "beta1", 9, SIGSEGV, false, -1, "", "in MPI_Init")
                .find("crashed with SIGSEGV before training started (in MPI_Init); no checkpoint"),
            std::string::npos);
  // Once a step is done, the step says it.
  EXPECT_NE(RankDeathLine(2, 4, "beta1", 9, SIGSEGV, false, 5, "", "in its first step")
                .find("crashed with SIGSEGV at step 5; no checkpoint"),
            std::string::npos);
}

TEST(RankDeathLine, UnnamedSignalByNumber) {
  EXPECT_NE(
      RankDeathLine(1, 2, "h", 9, 40, false, 3, "").find("was killed by signal 40 at step 3;"),
      std::string::npos);
}

}  // namespace
}  // namespace dlh
