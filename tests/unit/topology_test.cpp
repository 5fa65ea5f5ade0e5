// topology_test — MakeTopology is a pure function of every rank's node name: no MPI here.
#include "launcher/comm/topology.hpp"

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "launcher/comm/allreduce.hpp"

namespace dlh {
namespace {

using Names = std::vector<std::string>;

TEST(TopologyTest, TwoEvenNodesGiveLocalRanksInRankOrder) {
  const Names names = {"a", "a", "b", "b"};
  const int node[] = {0, 0, 1, 1}, local[] = {0, 1, 0, 1};
  for (int r = 0; r < 4; ++r) {
    Topology t = MakeTopology(names, r);
    EXPECT_EQ(t.node, node[r]) << "rank " << r;
    EXPECT_EQ(t.local_rank, local[r]) << "rank " << r;
    EXPECT_EQ(t.local_size, 2);
    EXPECT_EQ(t.num_nodes, 2);
    EXPECT_TRUE(t.homogeneous);
    EXPECT_EQ(t.ranks_per_node, (std::vector<int>{2, 2}));
  }
}

TEST(TopologyTest, HeterogeneousNodesAreFlagged) {
  const Names names = {"a", "a", "a", "b"};
  Topology t2 = MakeTopology(names, 2);
  EXPECT_EQ(t2.node, 0);
  EXPECT_EQ(t2.local_rank, 2);
  EXPECT_EQ(t2.local_size, 3);
  Topology t3 = MakeTopology(names, 3);
  EXPECT_EQ(t3.node, 1);
  EXPECT_EQ(t3.local_rank, 0);
  EXPECT_EQ(t3.local_size, 1);
  EXPECT_EQ(t3.num_nodes, 2);
  EXPECT_FALSE(t3.homogeneous);
  EXPECT_EQ(t3.ranks_per_node, (std::vector<int>{3, 1}));
}

TEST(TopologyTest, SingleRankIsOneNode) {
  Topology t = MakeTopology({"a"}, 0);
  EXPECT_EQ(t.node, 0);
  EXPECT_EQ(t.num_nodes, 1);
  EXPECT_EQ(t.local_rank, 0);
  EXPECT_EQ(t.local_size, 1);
  EXPECT_TRUE(t.homogeneous);
  EXPECT_EQ(t.ranks_per_node, (std::vector<int>{1}));
}

TEST(TopologyTest, InterleavedRanksAreNumberedByFirstAppearance) {
  const Names names = {"b", "a", "b", "a"};  // node "b" is seen first, so it is node 0
  const int node[] = {0, 1, 0, 1}, local[] = {0, 0, 1, 1};
  for (int r = 0; r < 4; ++r) {
    Topology t = MakeTopology(names, r);
    EXPECT_EQ(t.node, node[r]) << "rank " << r;
    EXPECT_EQ(t.local_rank, local[r]) << "rank " << r;
    EXPECT_EQ(t.local_size, 2);
    EXPECT_TRUE(t.homogeneous);
  }
}

TEST(TopologyTest, EmptyListAndBadRankThrow) {
  EXPECT_THROW(MakeTopology({}, 0), Error);
  EXPECT_THROW(MakeTopology({"a", "b"}, 2), Error);
  EXPECT_THROW(MakeTopology({"a", "b"}, -1), Error);
}

}  // namespace
}  // namespace dlh

namespace dlh {
namespace {

TEST(TopologyTest, DescribeNamesEvenAndUnevenShapes) {
  EXPECT_EQ(DescribeTopology(MakeTopology({"a", "a", "b", "b"}, 0)), "2 nodes x 2 ranks");
  EXPECT_EQ(DescribeTopology(MakeTopology({"a", "a", "b"}, 2)), "2 nodes, 3 ranks, uneven");
}

TEST(TopologyTest, AutoPicksHierarchicalOnlyWithALocalStepAcrossNodes) {
  EXPECT_TRUE(UseHierarchical("auto", MakeTopology({"a", "a", "b", "b"}, 0)));
  EXPECT_TRUE(UseHierarchical("auto", MakeTopology({"a", "a", "b"}, 0)));
  EXPECT_FALSE(UseHierarchical("auto", MakeTopology({"a", "a"}, 0)));       // one node
  EXPECT_FALSE(UseHierarchical("auto", MakeTopology({"a", "b", "c"}, 0)));  // one rank per node
  EXPECT_TRUE(UseHierarchical("hierarchical", MakeTopology({"a"}, 0)));
  EXPECT_FALSE(UseHierarchical("flat", MakeTopology({"a", "a", "b", "b"}, 0)));
  EXPECT_THROW(UseHierarchical("ring", MakeTopology({"a"}, 0)), UsageError);
}

}  // namespace
}  // namespace dlh
