// allreduce_mpitest — flat and hierarchical allreduce under mpirun (2, 3 and 4 ranks),
// with ranks pretending to sit on several nodes: closed-form sums over awkward counts,
// and flat == hierarchical bit for bit on integer-valued floats.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstring>
#include <memory>
#include <tuple>

#include "launcher/comm/allreduce.hpp"
#include "launcher/comm/grad_sync.hpp"
#include "tests/mpi/mpi_test_util.hpp"

namespace dlh {
namespace {

using test::Rank;
using test::Size;

enum class Layout { TwoNodes, FirstAlone, OnePerNode, OneNode };

std::vector<std::string> Names(Layout layout) {
  const int n = Size();
  std::vector<std::string> names;
  for (int r = 0; r < n; ++r) {
    switch (layout) {
      case Layout::TwoNodes:  // {n0, n1} for 2 ranks, {n0, n0, n1} for 3, {n0, n0, n1, n1} for 4
        names.push_back("n" + std::to_string(r * 2 / n));
        break;
      case Layout::FirstAlone:  // rank 0 alone, the rest on node 1: heterogeneous from 3 ranks
        names.push_back(r == 0 ? "n0" : "n1");
        break;
      case Layout::OnePerNode:
        names.push_back("n" + std::to_string(r));
        break;
      case Layout::OneNode:
        names.push_back("n0");
        break;
    }
  }
  return names;
}

// Counts not divisible by the node's rank count run the hierarchical tail step (PlanShards
// in planner.hpp), the step the GPU path runs with NCCL: tails of 1 and L-1 elements with 2
// (TwoNodes at 4 ranks: also across nodes), 3 and 4 (OneNode) ranks per node, and counts
// below the rank count (all tail, no shards).
class AllreduceTest : public ::testing::TestWithParam<std::tuple<Layout, size_t>> {};

TEST_P(AllreduceTest, FlatAndHierarchicalMatchClosedFormBitForBit) {
  const auto [layout, count] = GetParam();
  const std::vector<std::string> names = Names(layout);
  auto flat = MakeAllreducer("flat", MPI_COMM_WORLD, names);
  auto hier = MakeAllreducer("hierarchical", MPI_COMM_WORLD, names);
  ASSERT_STREQ(flat->name(), "flat");
  ASSERT_STREQ(hier->name(), "hierarchical");
  const int n = Size(), r = Rank();
  for (int round = 0; round < 2; ++round) {  // scratch buffers are reused across calls
    std::vector<float> a(count), b(count);
    for (size_t i = 0; i < count; ++i) a[i] = float((r + 1) * int(i % 7 + 1));
    b = a;
    flat->allreduce(a.data(), count);
    hier->allreduce(b.data(), count);
    ASSERT_EQ(0, count ? std::memcmp(a.data(), b.data(), count * sizeof(float)) : 0);
    for (size_t i = 0; i < count; ++i) {
      // sum over ranks of (r + 1) * c = n(n+1)/2 * c, exact in fp32 here
      const float expected = float(n * (n + 1) / 2 * int(i % 7 + 1));
      ASSERT_EQ(b[i], expected) << "index " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, AllreduceTest,
    ::testing::Combine(::testing::Values(Layout::TwoNodes, Layout::FirstAlone, Layout::OnePerNode,
                                         Layout::OneNode),
                       ::testing::Values(size_t(0), size_t(1), size_t(2), size_t(3), size_t(5),
                                         size_t(6), size_t(7), size_t(1000), size_t(1001),
                                         size_t(1002), size_t(65537), size_t(1 << 20) + 3)));

TEST(Allreduce, NodeCommsFollowTheGivenNames) {
  const auto names = Names(Layout::TwoNodes);
  NodeComms c = BuildNodeComms(MPI_COMM_WORLD, names);
  const Topology t = MakeTopology(names, Rank());
  EXPECT_EQ(c.topo.node, t.node);
  EXPECT_EQ(c.local.size(), t.local_size);
  EXPECT_EQ(c.local.rank(), t.local_rank);
  EXPECT_EQ(c.cross.rank(), t.node);
}

TEST(Allreduce, AutoPicksHierarchicalOnlyWithSeveralRanksOnSeveralNodes) {
  const int n = Size();
  EXPECT_STREQ(MakeAllreducer("auto", MPI_COMM_WORLD, Names(Layout::OneNode))->name(), "flat");
  EXPECT_STREQ(MakeAllreducer("auto", MPI_COMM_WORLD, Names(Layout::OnePerNode))->name(), "flat");
  EXPECT_STREQ(MakeAllreducer("auto", MPI_COMM_WORLD, Names(Layout::TwoNodes))->name(),
               n > 2 ? "hierarchical" : "flat");
}

TEST(Allreduce, UnknownKindIsAUsageError) {
  try {
    MakeAllreducer("ring", MPI_COMM_WORLD, Names(Layout::OneNode));
    FAIL() << "no exception";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "--allreduce: must be one of auto, flat, hierarchical, got 'ring'");
  }
}

TEST(Allreduce, GradientSyncWithReducerGivesTheSameSums) {
  const std::vector<int> sizes = {0, 1, 7, 1000, 3, 65537, 13};
  const int n = Size(), r = Rank();
  auto hier = MakeAllreducer("hierarchical", MPI_COMM_WORLD, Names(Layout::TwoNodes));
  std::vector<std::vector<float>> results;
  for (bool use_reducer : {false, true}) {
    std::vector<std::unique_ptr<Tensor>> values, grads;
    std::vector<NamedParam> params;
    std::vector<size_t> layer;
    for (size_t i = 0; i < sizes.size(); ++i) {
      values.push_back(std::make_unique<Tensor>(std::vector<int>{sizes[i]}));
      grads.push_back(std::make_unique<Tensor>(std::vector<int>{sizes[i]}));
      params.push_back(
          {"p" + std::to_string(i), {"w", values.back().get(), grads.back().get(), true}});
      layer.push_back(i / 2);
    }
    GradSyncOptions opt;
    opt.bucket_bytes = 4096;  // several buckets, some of one tensor
    opt.reducer = use_reducer ? hier.get() : nullptr;
    GradientSync sync(MPI_COMM_WORLD, params, layer, opt);
    for (size_t t = 0; t < sizes.size(); ++t)
      for (int i = 0; i < sizes[t]; ++i) (*grads[t])[size_t(i)] = float((r + 1) * (i % 7 + 1));
    for (size_t l = (sizes.size() + 1) / 2; l-- > 0;) sync.layer_done(l);
    sync.finish();
    std::vector<float> all;
    for (size_t t = 0; t < sizes.size(); ++t)
      for (int i = 0; i < sizes[t]; ++i) {
        const float g = (*grads[t])[size_t(i)];
        ASSERT_EQ(g, float(n * (n + 1) / 2 * (i % 7 + 1))) << "tensor " << t << " index " << i;
        all.push_back(g);
      }
    results.push_back(all);
  }
  EXPECT_EQ(results[0], results[1]);
}

}  // namespace
}  // namespace dlh
