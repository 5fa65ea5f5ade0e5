// grad_sync_mpitest — the fused gradient allreduce under mpirun (2 and 3 ranks):
// closed-form sums over awkward sizes and bucket sizes, overlap on and off.
#include <gtest/gtest.h>
#include <mpi.h>

#include <memory>
#include <tuple>

#include "launcher/comm/grad_sync.hpp"
#include "launcher/comm/planner.hpp"
#include "tests/mpi/mpi_test_util.hpp"

namespace dlh {
namespace {

using test::Rank;
using test::Size;

// Tensors of awkward sizes (0, 1, primes, > one bucket) across "layers".
struct Model {
  std::vector<std::unique_ptr<Tensor>> values, grads;
  std::vector<NamedParam> params;
  std::vector<size_t> layer;
  explicit Model(const std::vector<int>& sizes) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      values.push_back(std::make_unique<Tensor>(std::vector<int>{sizes[i]}));
      grads.push_back(std::make_unique<Tensor>(std::vector<int>{sizes[i]}));
      params.push_back(
          {"p" + std::to_string(i), {"w", values.back().get(), grads.back().get(), true}});
      layer.push_back(i / 2);  // two tensors per layer
    }
  }
};

class GradSyncTest : public ::testing::TestWithParam<std::tuple<size_t, bool>> {};

TEST_P(GradSyncTest, SumsMatchClosedForm) {
  const auto [bucket_bytes, overlap] = GetParam();
  const std::vector<int> sizes = {0, 1, 7, 1000, 3, 65537, 13, (1 << 20) + 3};
  Model m(sizes);
  GradSyncOptions opt;
  opt.bucket_bytes = bucket_bytes;
  opt.overlap = overlap;
  GradientSync sync(MPI_COMM_WORLD, m.params, m.layer, opt);
  const int n = Size(), r = Rank();
  for (int round = 0; round < 2; ++round) {  // buffers are reused across steps
    for (size_t t = 0; t < sizes.size(); ++t)
      for (int i = 0; i < sizes[t]; ++i) (*m.grads[t])[size_t(i)] = float(r + 1 + (i % 5) + round);
    size_t layers = (sizes.size() + 1) / 2;
    for (size_t l = layers; l-- > 0;) sync.layer_done(l);
    sync.finish();
    for (size_t t = 0; t < sizes.size(); ++t)
      for (int i = 0; i < sizes[t]; ++i) {
        // sum over ranks of (r + 1 + c) = n(n+1)/2 + n*c, exact in fp32 here
        float expected = float(n * (n + 1) / 2 + n * ((i % 5) + round));
        ASSERT_EQ((*m.grads[t])[size_t(i)], expected) << "tensor " << t << " index " << i;
      }
  }
}

INSTANTIATE_TEST_SUITE_P(Buckets, GradSyncTest,
                         ::testing::Combine(::testing::Values(size_t(1), size_t(4096),
                                                              size_t(1) << 22, size_t(1) << 30),
                                            ::testing::Bool()));

TEST(GradSync, FusesSmallTensorsIntoFewBuckets) {
  std::vector<int> sizes(100, 10);
  Model m(sizes);
  GradientSync sync(MPI_COMM_WORLD, m.params, m.layer, GradSyncOptions{});
  EXPECT_EQ(sync.num_buckets(), 1u);
  GradSyncOptions tiny;
  tiny.bucket_bytes = 40 * 10;  // ten tensors per bucket
  GradientSync sync10(MPI_COMM_WORLD, m.params, m.layer, tiny);
  EXPECT_EQ(sync10.num_buckets(), 10u);
}

// No packing copies: every gradient becomes a view of one flat array, in forward order and
// packed tight, keeping what it held, so each bucket is summed where backward wrote it.
TEST(GradSync, GradientsBecomeViewsOfOneFlatArrayKeepingTheirValues) {
  const std::vector<int> sizes = {0, 1, 7, 1000, 3, 65537, 13};
  Model m(sizes);
  for (size_t t = 0; t < sizes.size(); ++t)
    for (int i = 0; i < sizes[t]; ++i) (*m.grads[t])[size_t(i)] = float(t * 100 + size_t(i % 50));
  GradSyncOptions opt;
  opt.bucket_bytes = 4096;  // several multi-tensor buckets
  GradientSync sync(MPI_COMM_WORLD, m.params, m.layer, opt);
  for (size_t t = 0; t < sizes.size(); ++t) {
    EXPECT_TRUE(m.grads[t]->is_view()) << "tensor " << t;
    if (t > 0) {
      EXPECT_EQ(m.grads[t]->data(), m.grads[t - 1]->data() + sizes[t - 1]) << t;
    }
    for (int i = 0; i < sizes[t]; ++i)
      ASSERT_EQ((*m.grads[t])[size_t(i)], float(t * 100 + size_t(i % 50))) << t << " " << i;
  }
  for (size_t l = (sizes.size() + 1) / 2; l-- > 0;) sync.layer_done(l);
  sync.finish();
  const float n = float(Size());
  for (size_t t = 0; t < sizes.size(); ++t)
    for (int i = 0; i < sizes[t]; ++i)
      ASSERT_EQ((*m.grads[t])[size_t(i)], n * float(t * 100 + size_t(i % 50))) << t << " " << i;
}

TEST(GradSync, BucketsAreThoseOfThePlannerTheCudaEngineUses) {
  const std::vector<int> sizes = {0, 1, 7, 1000, 3, 65537, 13, (1 << 20) + 3};
  Model m(sizes);
  const std::vector<size_t> counts(sizes.begin(), sizes.end());
  for (size_t bytes : {size_t(1), size_t(4096), size_t(1) << 22, size_t(1) << 30}) {
    GradSyncOptions opt;
    opt.bucket_bytes = bytes;
    GradientSync sync(MPI_COMM_WORLD, m.params, m.layer, opt);
    EXPECT_EQ(sync.num_buckets(), PlanBuckets(counts, m.layer, bytes).size()) << bytes << " bytes";
  }
}

}  // namespace
}  // namespace dlh
