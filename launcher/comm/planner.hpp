// DLH — the plans both engines' gradient allreduce follow, as pure functions of sizes (no
// MPI, no CUDA), so they are unit-tested alone (tests/unit/planner_test.cpp):
//
//   buckets  which gradients are fused into one allreduce call, in launch order (last layer
//            first). Both engines keep the gradients in one flat array (forward order)
//            and reduce the range each bucket spans (BucketSpan), where backward wrote it.
//   shards   how the hierarchical allreduce of a node whose peers all have the same rank
//            count splits `count` elements among its local ranks: equal shards, then a
//            tail of fewer than local_size elements (PlanShards). HierarchicalAllreducer
//            (MPI, host memory) and GpuGradientSync (NCCL, device memory) run the same
//            plan step for step, so the CPU MPI tests exercise the GPU's tail path too.
// Sizes are in elements (4-byte floats) unless a name says bytes.
#pragma once

#include <cstddef>
#include <vector>

namespace dlh {

// [offset, offset + count), in elements.
struct ElementRange {
  size_t offset = 0;
  size_t count = 0;
};

struct BucketPlan {
  std::vector<size_t> params;  // parameter indices (forward order), listed last to first
  size_t count = 0;            // elements of all its parameters together
  size_t min_layer = 0;        // its gradients all exist once backward has finished this layer
};

// Parameter i (forward order) has `param_count[i]` elements and belongs to layer
// `param_layer[i]` (non-decreasing). Buckets come in launch order, the order backward
// finishes their gradients: parameters are taken last to first and a bucket is closed when
// the next one would take it over `bucket_bytes`; a parameter larger than `bucket_bytes`
// gets a bucket of its own. Every parameter is in exactly one bucket (one of 0 elements
// too). Throws dlh::Error when the two lists differ in length.
std::vector<BucketPlan> PlanBuckets(const std::vector<size_t>& param_count,
                                    const std::vector<size_t>& param_layer, size_t bucket_bytes);

// For an engine that keeps all parameters in one flat array, in forward order at
// increasing offsets (`param_range[i]` is parameter i's place, gaps allowed): the range
// from the bucket's first element to its last. Gaps inside it are reduced along with the
// gradients, so they must hold zeros. Throws dlh::Error on an index out of range.
ElementRange BucketSpan(const BucketPlan& bucket, const std::vector<ElementRange>& param_range);

// The hierarchical allreduce of `count` elements on a node of `local_size` ranks:
//   body  [0, shard * local_size): reduce-scatter inside the node (local rank k gets the
//         node's sum of ShardOf(plan, k)), allreduce of each shard across nodes among the
//         ranks with the same local rank, all-gather inside the node;
//   tail  the last count % local_size elements (fewer than local_size): allreduce inside
//         the node, then across nodes among the ranks with the same local rank (every
//         local rank sums the same few elements, in parallel).
// Either part may be empty: the tail when local_size divides count, the body when count is
// smaller than local_size.
struct ShardPlan {
  int local_size = 1;
  size_t shard = 0;   // elements per local rank: count / local_size, the same for every rank
  ElementRange body;  // {0, shard * local_size}
  ElementRange tail;  // {shard * local_size, count % local_size}
};

// Throws dlh::Error unless local_size >= 1.
ShardPlan PlanShards(size_t count, int local_size);

// Local rank `local_rank`'s shard of the body, {local_rank * shard, shard}: where an
// in-place reduce-scatter writes it and where an all-gather reads it. Throws dlh::Error
// unless 0 <= local_rank < local_size of the plan.
ElementRange ShardOf(const ShardPlan& plan, int local_rank);

}  // namespace dlh
