// planner_test — the bucket and shard plans both engines' gradient allreduce follow: pure
// functions, so no MPI and no GPU here. Bucket plans are checked as GradientSync uses them
// (parameter lists) and as the CUDA engine uses them (spans of an aligned flat array);
// shard plans as GpuGradientSync hands them to NCCL (equal shards written in place) and by
// running the plan's steps on simulated nodes against the plain sum.
#include "launcher/comm/planner.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <tuple>
#include <vector>

#include "common/error.hpp"

namespace dlh {
namespace {

// ---- shard plans

const size_t kCounts[] = {0, 1, 2, 7, 1000, 65537, (size_t(1) << 20) + 3};
const int kLocalSizes[] = {1, 2, 3, 4, 8};

class ShardPlanTest : public ::testing::TestWithParam<std::tuple<size_t, int>> {};

TEST_P(ShardPlanTest, ShardsThenTailCoverEveryElementOnceInOrder) {
  const auto [count, local_size] = GetParam();
  const ShardPlan plan = PlanShards(count, local_size);
  size_t next = 0;  // every range starts where the previous one ended
  for (int k = 0; k < local_size; ++k) {
    const ElementRange shard = ShardOf(plan, k);
    EXPECT_EQ(shard.offset, next) << "local rank " << k;
    next = shard.offset + shard.count;
  }
  EXPECT_EQ(next, plan.body.offset + plan.body.count);
  EXPECT_EQ(plan.tail.offset, next);
  EXPECT_EQ(plan.tail.offset + plan.tail.count, count);
}

TEST_P(ShardPlanTest, ShardsAreEqualAndTheTailIsShorterThanTheNode) {
  const auto [count, local_size] = GetParam();
  const ShardPlan plan = PlanShards(count, local_size);
  EXPECT_EQ(plan.local_size, local_size);
  EXPECT_EQ(plan.shard, count / size_t(local_size));
  for (int k = 0; k < local_size; ++k) EXPECT_EQ(ShardOf(plan, k).count, plan.shard);
  EXPECT_EQ(plan.tail.count, count % size_t(local_size));
  EXPECT_LT(plan.tail.count, size_t(local_size));
}

// How GpuGradientSync calls NCCL: ncclReduceScatter(body, data + ShardOf(rank).offset,
// shard) in place needs recvbuff == sendbuff + rank * recvcount and sendcount == nranks *
// recvcount; ncclAllGather reads the same place back.
TEST_P(ShardPlanTest, ShardsSitWhereNcclInPlaceReduceScatterWritesThem) {
  const auto [count, local_size] = GetParam();
  const ShardPlan plan = PlanShards(count, local_size);
  EXPECT_EQ(plan.body.offset, 0u);
  EXPECT_EQ(plan.body.count, plan.shard * size_t(local_size));
  for (int k = 0; k < local_size; ++k)
    EXPECT_EQ(ShardOf(plan, k).offset, plan.body.offset + size_t(k) * plan.shard);
}

INSTANTIATE_TEST_SUITE_P(AwkwardCounts, ShardPlanTest,
                         ::testing::Combine(::testing::ValuesIn(kCounts),
                                            ::testing::ValuesIn(kLocalSizes)));

// The plan's steps, run on `nodes` x `local_size` simulated ranks whose buffers hold
// small integers, give every rank the plain sum: the arithmetic both engines run. (Not the
// 1 Mi count: 3 x 8 simulated buffers of it would take 200 MB.)
class ShardStepsTest : public ::testing::TestWithParam<std::tuple<size_t, int>> {};

TEST_P(ShardStepsTest, PlanStepsOnSimulatedNodesGiveEveryRankTheSum) {
  const auto [count, local_size] = GetParam();
  const int nodes = 3;
  const size_t l = size_t(local_size);
  // rank (node, k) holds value(node, k, i) at element i
  auto value = [&](int node, int k, size_t i) {
    return int64_t(node * 10 + k + 1) * int64_t(i % 7 + 1);
  };
  std::vector<std::vector<std::vector<int64_t>>> data(
      nodes, std::vector<std::vector<int64_t>>(l, std::vector<int64_t>(count)));
  for (int node = 0; node < nodes; ++node)
    for (size_t k = 0; k < l; ++k)
      for (size_t i = 0; i < count; ++i) data[node][k][i] = value(node, int(k), i);

  const ShardPlan plan = PlanShards(count, local_size);
  // Body: reduce-scatter in each node, sum of each shard across nodes, all-gather.
  std::vector<std::vector<std::vector<int64_t>>> shard(nodes, std::vector<std::vector<int64_t>>(l));
  for (int node = 0; node < nodes; ++node)
    for (size_t k = 0; k < l; ++k) {
      const ElementRange r = ShardOf(plan, int(k));
      shard[node][k].assign(r.count, 0);
      for (size_t j = 0; j < l; ++j)
        for (size_t i = 0; i < r.count; ++i) shard[node][k][i] += data[node][j][r.offset + i];
    }
  for (size_t k = 0; k < l; ++k)
    for (size_t i = 0; i < plan.shard; ++i) {
      int64_t total = 0;
      for (int node = 0; node < nodes; ++node) total += shard[node][k][i];
      for (int node = 0; node < nodes; ++node) shard[node][k][i] = total;
    }
  for (int node = 0; node < nodes; ++node)
    for (size_t j = 0; j < l; ++j)
      for (size_t k = 0; k < l; ++k) {
        const ElementRange r = ShardOf(plan, int(k));
        for (size_t i = 0; i < r.count; ++i) data[node][j][r.offset + i] = shard[node][k][i];
      }
  // Tail: allreduce in each node, then across nodes among equal local ranks.
  for (size_t i = plan.tail.offset; i < plan.tail.offset + plan.tail.count; ++i) {
    std::vector<int64_t> node_sum(nodes, 0);
    for (int node = 0; node < nodes; ++node)
      for (size_t k = 0; k < l; ++k) node_sum[node] += data[node][k][i];
    for (size_t k = 0; k < l; ++k) {
      int64_t total = 0;
      for (int node = 0; node < nodes; ++node) total += node_sum[node];
      for (int node = 0; node < nodes; ++node) data[node][k][i] = total;
    }
  }

  for (size_t i = 0; i < count; ++i) {
    int64_t expected = 0;
    for (int node = 0; node < nodes; ++node)
      for (size_t k = 0; k < l; ++k) expected += value(node, int(k), i);
    for (int node = 0; node < nodes; ++node)
      for (size_t k = 0; k < l; ++k)
        ASSERT_EQ(data[node][k][i], expected)
            << "node " << node << " local rank " << k << " index " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(AwkwardCounts, ShardStepsTest,
                         ::testing::Combine(::testing::Values(size_t(0), size_t(1), size_t(2),
                                                              size_t(7), size_t(1000),
                                                              size_t(65537)),
                                            ::testing::ValuesIn(kLocalSizes)));

TEST(PlannerTest, TailHoldsNoneOneOrLocalSizeMinusOneElements) {
  for (int l : {2, 3, 4, 8}) {
    const size_t body = 5 * size_t(l);
    EXPECT_EQ(PlanShards(body, l).tail.count, 0u) << "local size " << l;
    EXPECT_EQ(PlanShards(body + 1, l).tail.count, 1u) << "local size " << l;
    const ShardPlan last = PlanShards(body + size_t(l) - 1, l);
    EXPECT_EQ(last.tail.count, size_t(l) - 1) << "local size " << l;
    EXPECT_EQ(last.tail.offset, body) << "local size " << l;
    EXPECT_EQ(last.shard, 5u) << "local size " << l;
  }
}

TEST(PlannerTest, CountBelowLocalSizeIsAllTail) {
  const ShardPlan plan = PlanShards(3, 8);
  EXPECT_EQ(plan.shard, 0u);
  EXPECT_EQ(plan.body.count, 0u);
  EXPECT_EQ(plan.tail.offset, 0u);
  EXPECT_EQ(plan.tail.count, 3u);
}

TEST(PlannerTest, OneRankPerNodeHasNoTail) {
  const ShardPlan plan = PlanShards(1001, 1);
  EXPECT_EQ(plan.shard, 1001u);
  EXPECT_EQ(plan.tail.count, 0u);
  EXPECT_EQ(ShardOf(plan, 0).count, 1001u);
}

TEST(PlannerTest, BadLocalSizeOrRankIsAnError) {
  EXPECT_THROW(PlanShards(10, 0), Error);
  const ShardPlan plan = PlanShards(10, 4);
  EXPECT_THROW(ShardOf(plan, 4), Error);
  EXPECT_THROW(ShardOf(plan, -1), Error);
}

// ---- bucket plans

size_t Bytes(const BucketPlan& b, const std::vector<size_t>& count) {
  size_t bytes = 0;
  for (size_t k : b.params) bytes += count[k] * sizeof(float);
  return bytes;
}

// Sizes as the gradient sync MPI tests use them: empty, tiny, primes, one over 4 MiB.
const std::vector<size_t> kSizes = {0, 1, 7, 1000, 3, 65537, 13, (size_t(1) << 20) + 3, 0, 5};
std::vector<size_t> TwoPerLayer(size_t n) {
  std::vector<size_t> layer(n);
  for (size_t i = 0; i < n; ++i) layer[i] = i / 2;
  return layer;
}

class BucketPlanTest : public ::testing::TestWithParam<size_t> {};

TEST_P(BucketPlanTest, EveryParameterIsInOneBucketInBackwardOrder) {
  const auto buckets = PlanBuckets(kSizes, TwoPerLayer(kSizes.size()), GetParam());
  std::vector<size_t> order;
  for (const auto& b : buckets) {
    ASSERT_FALSE(b.params.empty());
    order.insert(order.end(), b.params.begin(), b.params.end());
  }
  std::vector<size_t> backward(kSizes.size());
  std::iota(backward.rbegin(), backward.rend(), size_t(0));
  EXPECT_EQ(order, backward);
}

TEST_P(BucketPlanTest, BucketsStayWithinTheByteLimitUnlessOneTensorExceedsIt) {
  const size_t limit = GetParam();
  const auto buckets = PlanBuckets(kSizes, TwoPerLayer(kSizes.size()), limit);
  for (size_t i = 0; i < buckets.size(); ++i) {
    const size_t bytes = Bytes(buckets[i], kSizes);
    if (bytes > limit) {
      EXPECT_EQ(buckets[i].params.size(), 1u) << "bucket " << i;
    }
    size_t count = 0;
    for (size_t k : buckets[i].params) count += kSizes[k];
    EXPECT_EQ(buckets[i].count, count) << "bucket " << i;
  }
}

// Greedy, as GradientSync always did: a bucket is closed only because the next parameter
// would take it over the limit (so the same model and limit give the same buckets, and a
// resumed run sums in the same grouping).
TEST_P(BucketPlanTest, ABucketClosesOnlyWhenTheNextParameterWouldOverflowIt) {
  const size_t limit = GetParam();
  const auto buckets = PlanBuckets(kSizes, TwoPerLayer(kSizes.size()), limit);
  for (size_t i = 0; i + 1 < buckets.size(); ++i)
    EXPECT_GT(Bytes(buckets[i], kSizes) + kSizes[buckets[i + 1].params.front()] * sizeof(float),
              limit)
        << "bucket " << i;
}

TEST_P(BucketPlanTest, ABucketIsReadyAtTheLeastLayerOfItsParameters) {
  const std::vector<size_t> layer = TwoPerLayer(kSizes.size());
  const auto buckets = PlanBuckets(kSizes, layer, GetParam());
  for (size_t i = 0; i < buckets.size(); ++i) {
    size_t least = layer[buckets[i].params.front()];
    for (size_t k : buckets[i].params) least = std::min(least, layer[k]);
    EXPECT_EQ(buckets[i].min_layer, least) << "bucket " << i;
    if (i > 0) {
      EXPECT_LE(buckets[i].min_layer, buckets[i - 1].min_layer) << "bucket " << i;
    }
  }
}

// As CudaEngine lays out its gradient array: forward order, each parameter aligned to 64
// floats, the gaps zero. The spans it reduces cover each gradient element exactly once.
TEST_P(BucketPlanTest, SpansOfTheCudaEnginesAlignedArrayCoverEachGradientOnce) {
  std::vector<ElementRange> ranges;
  size_t total = 0;
  for (size_t c : kSizes) {
    ranges.push_back(ElementRange{total, c});
    total += (c + 63) / 64 * 64;
  }
  const auto buckets = PlanBuckets(kSizes, TwoPerLayer(kSizes.size()), GetParam());
  std::vector<int> covered(total, 0);
  size_t previous_end = total;
  for (const auto& b : buckets) {
    const ElementRange span = BucketSpan(b, ranges);
    EXPECT_LE(span.offset + span.count, previous_end) << "launch order is backward";
    previous_end = span.offset;
    for (size_t i = span.offset; i < span.offset + span.count; ++i) ++covered[i];
    for (size_t k : b.params) {
      EXPECT_GE(ranges[k].offset, span.offset) << "parameter " << k;
      EXPECT_LE(ranges[k].offset + ranges[k].count, span.offset + span.count) << "parameter " << k;
    }
  }
  for (size_t k = 0; k < kSizes.size(); ++k)
    for (size_t i = ranges[k].offset; i < ranges[k].offset + ranges[k].count; ++i)
      ASSERT_EQ(covered[i], 1) << "parameter " << k << " element " << i;
}

INSTANTIATE_TEST_SUITE_P(Limits, BucketPlanTest,
                         ::testing::Values(size_t(1), size_t(4096), size_t(4) << 20,
                                           size_t(1) << 30));

TEST(PlannerTest, BucketsFillGreedilyFromTheLastParameter) {
  // 50 floats (200 bytes) per bucket, filled last to first: 50 | 40 | 30+20 | 10.
  const std::vector<size_t> sizes = {10, 20, 30, 40, 50};
  const auto buckets = PlanBuckets(sizes, {0, 0, 1, 1, 2}, 200);
  ASSERT_EQ(buckets.size(), 4u);
  EXPECT_EQ(buckets[0].params, (std::vector<size_t>{4}));
  EXPECT_EQ(buckets[1].params, (std::vector<size_t>{3}));
  EXPECT_EQ(buckets[2].params, (std::vector<size_t>{2, 1}));
  EXPECT_EQ(buckets[3].params, (std::vector<size_t>{0}));
  EXPECT_EQ(buckets[0].min_layer, 2u);
  EXPECT_EQ(buckets[2].min_layer, 0u);
  EXPECT_EQ(buckets[2].count, 50u);
}

TEST(PlannerTest, OversizedTensorGetsABucketOfItsOwn) {
  const std::vector<size_t> sizes = {1, 2, 1000, 3, 4};
  const auto buckets = PlanBuckets(sizes, {0, 1, 2, 3, 4}, 64);  // 16 floats
  ASSERT_EQ(buckets.size(), 3u);
  EXPECT_EQ(buckets[0].params, (std::vector<size_t>{4, 3}));
  EXPECT_EQ(buckets[1].params, (std::vector<size_t>{2}));
  EXPECT_EQ(buckets[2].params, (std::vector<size_t>{1, 0}));
}

TEST(PlannerTest, DefaultBucketSizeFusesSmallModelIntoOneBucket) {
  const std::vector<size_t> sizes(100, 10);
  EXPECT_EQ(PlanBuckets(sizes, std::vector<size_t>(100, 0), size_t(4) << 20).size(), 1u);
  EXPECT_EQ(PlanBuckets(sizes, std::vector<size_t>(100, 0), 400).size(), 10u);
}

TEST(PlannerTest, SpanIncludesAlignmentGapsBetweenItsParameters) {
  const std::vector<ElementRange> ranges = {{0, 10}, {64, 5}, {128, 70}};
  const auto buckets = PlanBuckets({10, 5, 70}, {0, 0, 1}, 1 << 20);
  ASSERT_EQ(buckets.size(), 1u);
  const ElementRange span = BucketSpan(buckets[0], ranges);
  EXPECT_EQ(span.offset, 0u);
  EXPECT_EQ(span.count, 198u);
}

TEST(PlannerTest, NoParametersGiveNoBuckets) { EXPECT_TRUE(PlanBuckets({}, {}, 4096).empty()); }

TEST(PlannerTest, MismatchedLayerListIsAnError) {
  EXPECT_THROW(PlanBuckets({1, 2, 3}, {0, 1}, 4096), Error);
}

}  // namespace
}  // namespace dlh
