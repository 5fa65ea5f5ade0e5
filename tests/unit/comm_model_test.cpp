// The GPU allreduce algorithms' models (estimator/model/comm_model.hpp) against their
// formulas worked by hand, and the regimes they fall in.
#include "estimator/model/comm_model.hpp"

#include <gtest/gtest.h>

namespace dlh {
namespace {

const AlphaBeta kNvlink(2.5e-6, 1 / 370e9);  // NCCL's H100 ring bus bandwidth
const AlphaBeta kNdr(5e-6, 1 / 188e9);       // four 400 Gb/s NICs per node
const AlphaBeta kPcie(10e-6, 1 / 50e9);      // pinned copies

TEST(GpuAllreduceModels, OneNodeIsTheIntraNodeRingForBoth) {
  const double n = 40e6;
  EXPECT_DOUBLE_EQ(FlatNcclAllreduceSeconds(n, 8, 1, kNvlink, kNdr),
                   RingAllreduceSeconds(n, 8, kNvlink));
  EXPECT_DOUBLE_EQ(StagedHybridAllreduceSeconds(n, 8, 1, kNvlink, kNdr, kPcie),
                   RingAllreduceSeconds(n, 8, kNvlink));
  EXPECT_EQ(FlatNcclAllreduceSeconds(0, 8, 4, kNvlink, kNdr), 0);
  EXPECT_EQ(StagedHybridAllreduceSeconds(n, 1, 1, kNvlink, kNdr, kPcie), 0);
}

TEST(GpuAllreduceModels, FormulasByHand) {
  const double n = 100e6;
  // Flat, 2 nodes x 8: 30 steps of n/16 bytes at the slower link (the network).
  const double flat = 30 * (5e-6 + n / 16 / 188e9);
  EXPECT_NEAR(FlatNcclAllreduceSeconds(n, 8, 2, kNvlink, kNdr), flat, 1e-12);
  // Hybrid, 2 nodes x 8: the intra ring, two copies of n/8, and 2 steps of n/2 bytes.
  const double hybrid =
      14 * 2.5e-6 + 14.0 / 8 * n / 370e9 + 2 * (10e-6 + n / 8 / 50e9) + 2 * (5e-6 + n / 2 / 188e9);
  EXPECT_NEAR(StagedHybridAllreduceSeconds(n, 8, 2, kNvlink, kNdr, kPcie), hybrid, 1e-12);
}

// Large gradients are bandwidth-bound: the hybrid's copies and intra-node phases cost more
// than the network traffic it saves. Small ones are latency-bound, where a ring over every
// rank pays 2 (p-1) latencies and the hybrid 2 (m-1): the model's flat path is a ring only.
TEST(GpuAllreduceModels, FlatWinsLargeGradientsAndTheRingsLatencyLosesSmallOnes) {
  for (int nodes : {2, 4, 8}) {
    EXPECT_LT(FlatNcclAllreduceSeconds(100e6, 8, nodes, kNvlink, kNdr),
              StagedHybridAllreduceSeconds(100e6, 8, nodes, kNvlink, kNdr, kPcie))
        << nodes << " nodes";
    EXPECT_GT(FlatNcclAllreduceSeconds(1e6, 8, nodes, kNvlink, kNdr),
              StagedHybridAllreduceSeconds(1e6, 8, nodes, kNvlink, kNdr, kPcie))
        << nodes << " nodes";
  }
}

}  // namespace
}  // namespace dlh
