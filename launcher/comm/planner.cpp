// DLH — bucket and shard plans of the gradient allreduce (see planner.hpp).
#include "launcher/comm/planner.hpp"

#include <string>
#include <utility>

#include "common/error.hpp"

namespace dlh {

std::vector<BucketPlan> PlanBuckets(const std::vector<size_t>& param_count,
                                    const std::vector<size_t>& param_layer, size_t bucket_bytes) {
  if (param_count.size() != param_layer.size())
    throw Error("bucket plan: " + std::to_string(param_count.size()) + " parameter sizes but " +
                std::to_string(param_layer.size()) + " layer indices");
  std::vector<BucketPlan> buckets;
  BucketPlan current;
  size_t current_bytes = 0;
  // Last to first: the order in which backward finishes the gradients.
  for (size_t k = param_count.size(); k-- > 0;) {
    const size_t bytes = param_count[k] * sizeof(float);
    // Close the bucket only when it holds something: a tensor over the limit then starts
    // (and, the next time round, closes) a bucket of its own instead of an empty one.
    if (!current.params.empty() && current_bytes + bytes > bucket_bytes) {
      buckets.push_back(std::move(current));
      current = BucketPlan();
      current_bytes = 0;
    }
    current.params.push_back(k);
    current.count += param_count[k];
    // Layers are non-decreasing in forward order: the last parameter added has the least.
    current.min_layer = param_layer[k];
    current_bytes += bytes;
  }
  if (!current.params.empty()) buckets.push_back(std::move(current));
  return buckets;
}

ElementRange BucketSpan(const BucketPlan& bucket, const std::vector<ElementRange>& param_range) {
  if (bucket.params.empty()) return ElementRange{};
  // params lists the highest index first: the last parameter in the flat array.
  const size_t first = bucket.params.back(), last = bucket.params.front();
  if (last >= param_range.size())
    throw Error("bucket plan: parameter " + std::to_string(last) + " has no place among " +
                std::to_string(param_range.size()));
  const size_t begin = param_range[first].offset;
  const size_t end = param_range[last].offset + param_range[last].count;
  if (end < begin) throw Error("bucket plan: parameter offsets are not in forward order");
  return ElementRange{begin, end - begin};
}

// Why equal shards plus a tail, rather than uneven shards (the first count % local_size
// ranks taking one element more): NCCL's ncclReduceScatter and ncclAllGather take one
// element count for every rank, so equal shards are the only layout the GPU can reduce in
// place without padding its gradient array or emulating a variable reduce-scatter with one
// grouped ncclReduce per rank. MPI does equal shards just as well (MPI_Reduce_scatter with
// equal counts, MPI_Allgather), so the CPU follows the same plan and its MPI tests run the
// tail step the GPU relies on. The tail is below local_size elements: summing it whole costs two
// small, latency-bound calls, and only when local_size does not divide count.
ShardPlan PlanShards(size_t count, int local_size) {
  if (local_size < 1)
    throw Error("shard plan: local size must be at least 1, got " + std::to_string(local_size));
  ShardPlan plan;
  plan.local_size = local_size;
  plan.shard = count / size_t(local_size);
  plan.body = ElementRange{0, plan.shard * size_t(local_size)};
  plan.tail = ElementRange{plan.body.count, count - plan.body.count};
  return plan;
}

ElementRange ShardOf(const ShardPlan& plan, int local_rank) {
  if (local_rank < 0 || local_rank >= plan.local_size)
    throw Error("shard plan: local rank " + std::to_string(local_rank) + " out of range for " +
                std::to_string(plan.local_size) + " local ranks");
  return ElementRange{size_t(local_rank) * plan.shard, plan.shard};
}

}  // namespace dlh
