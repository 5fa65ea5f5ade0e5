// gpu_assignment_test — launcher/engine/gpu_assignment.hpp: which visible GPU a rank takes,
// and the check that two ranks of one NCCL communicator never share a GPU (mpirun -np 2 on a
// one-GPU machine), while ranks posing as two nodes on one GPU may.
#include "launcher/engine/gpu_assignment.hpp"

#include <gtest/gtest.h>

namespace dlh {
namespace {

const char* kBus0 = "00000000:3B:00.0";
const char* kBus1 = "00000000:86:00.0";

TEST(GpuIndexFor, TheBindingsChoiceElseLocalRankModuloCount) {
  EXPECT_EQ(GpuIndexFor(1, 0, 4), 1);
  EXPECT_EQ(GpuIndexFor(-1, 3, 4), 3);
  EXPECT_EQ(GpuIndexFor(-1, 1, 1), 0);  // mpirun -np 2 on one GPU: both take GPU 0
  EXPECT_EQ(GpuIndexFor(-1, 5, 2), 1);
}

TEST(FindSharedGpu, TwoRanksOnOneGpuAreNamed) {
  const std::vector<RankGpu> ranks = {{"vm", "vm", kBus0}, {"vm", "vm", kBus0}};
  EXPECT_EQ(FindSharedGpu(ranks, false), std::string("ranks 0 and 1 on vm both use GPU ") + kBus0);
  EXPECT_EQ(FindSharedGpu(ranks, true), std::string("ranks 0 and 1 on vm both use GPU ") + kBus0);
}

TEST(FindSharedGpu, OneGpuPerRankPasses) {
  EXPECT_EQ(FindSharedGpu({{"vm", "vm", kBus0}, {"vm", "vm", kBus1}}, false), "");
}

TEST(FindSharedGpu, TheSameBusIdOnTwoMachinesIsTwoGpus) {
  EXPECT_EQ(FindSharedGpu({{"n1", "n1", kBus0}, {"n2", "n2", kBus0}}, false), "");
}

TEST(FindSharedGpu, RanksPosingAsTwoNodesMayShareAGpuHierarchically) {
  // gpu-check.sh's "2 nodes x 1 GPU": each node's NCCL communicator has one rank; the
  // cross-node step is MPI. Flat, the one communicator would hold both.
  const std::vector<RankGpu> ranks = {{"vm", "gpunode0", kBus0}, {"vm", "gpunode1", kBus0}};
  EXPECT_EQ(FindSharedGpu(ranks, true), "");
  EXPECT_NE(FindSharedGpu(ranks, false), "");
}

TEST(FindSharedGpu, TheFirstPairIsReported) {
  const std::vector<RankGpu> ranks = {
      {"vm", "vm", kBus0}, {"vm", "vm", kBus1}, {"vm", "vm", kBus1}, {"vm", "vm", kBus0}};
  EXPECT_EQ(FindSharedGpu(ranks, false), std::string("ranks 1 and 2 on vm both use GPU ") + kBus1);
}

}  // namespace
}  // namespace dlh
