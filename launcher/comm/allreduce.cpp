// DLH — flat and hierarchical allreduce (see allreduce.hpp).
#include "launcher/comm/allreduce.hpp"

#include <algorithm>
#include <climits>

namespace dlh {
namespace {

// MPI counts are int; a gradient bucket never comes close, so refuse rather than chunk.
int CheckedCount(size_t count) {
  if (count > size_t(INT_MAX))
    throw Error("allreduce: " + std::to_string(count) + " elements exceed MPI's int count");
  return int(count);
}

}  // namespace

Allreducer::~Allreducer() = default;

void FlatAllreducer::allreduce(float* data, size_t count) {
  if (count == 0) return;  // every rank has the same count, so all skip alike
  MPI_CHECK(
      MPI_Allreduce(MPI_IN_PLACE, data, CheckedCount(count), MPI_FLOAT, MPI_SUM, comm_.get()));
}

HierarchicalAllreducer::HierarchicalAllreducer(MPI_Comm comm,
                                               const std::vector<std::string>& node_of_rank)
    : comms_(BuildNodeComms(comm, node_of_rank)) {}

void HierarchicalAllreducer::allreduce(float* data, size_t count) {
  if (count == 0) return;
  const int n = CheckedCount(count);
  if (!comms_.topo.homogeneous) {
    root_reduce(data, n);
    root_cross_allreduce(data, n);
    root_broadcast(data, n);
    return;
  }
  // The plan GpuGradientSync::hierarchical_sum runs with NCCL (planner.hpp).
  const ShardPlan plan = PlanShards(count, comms_.topo.local_size);
  if (plan.shard > 0) {
    local_reduce_scatter(data, plan);
    cross_allreduce(shard_.data(), int(plan.shard));
    local_all_gather(data, plan);
  }
  if (plan.tail.count > 0) {
    float* tail = data + plan.tail.offset;
    local_allreduce(tail, int(plan.tail.count));
    cross_allreduce(tail, int(plan.tail.count));
  }
}

// Body, phase 1: each local rank ends up with the node's sum of its shard, ShardOf(plan,
// local_rank). Because all nodes have the same local_size, local rank k's shard is the same
// slice on every node, which is what lets the cross step pair them up.
void HierarchicalAllreducer::local_reduce_scatter(const float* data, const ShardPlan& plan) {
  shard_.resize(plan.shard);
  // MPI_Reduce_scatter with equal counts rather than MPI_Reduce_scatter_block: Open MPI
  // picks its algorithms (and so the order of the float sums) per collective, and this is
  // the one DLH used before the shared plan, so counts that local_size divides still sum
  // bit for bit as they did.
  shard_counts_.assign(size_t(plan.local_size), int(plan.shard));
  // Not MPI_IN_PLACE: in place the result lands at the start of the buffer, not at this
  // rank's offset where the all-gather needs it; a separate shard buffer costs one shard.
  MPI_CHECK(MPI_Reduce_scatter(data + plan.body.offset, shard_.data(), shard_counts_.data(),
                               MPI_FLOAT, MPI_SUM, comms_.local.get()));
}

// Body, phase 3: every local rank now owns one fully reduced shard; gather them all back
// into the body of the caller's buffer on every rank of the node.
void HierarchicalAllreducer::local_all_gather(float* data, const ShardPlan& plan) {
  MPI_CHECK(MPI_Allgather(shard_.data(), int(plan.shard), MPI_FLOAT, data + plan.body.offset,
                          int(plan.shard), MPI_FLOAT, comms_.local.get()));
}

// Tail, phase 1: fewer elements than local ranks, so no sharding; every local rank gets the
// node's sum of the whole tail.
void HierarchicalAllreducer::local_allreduce(float* data, int count) {
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data, count, MPI_FLOAT, MPI_SUM, comms_.local.get()));
}

// Body phase 2 (one shard) and tail phase 2 (the whole tail): sum across nodes. The cross
// communicator holds one rank per node with this local rank, so local_size allreduces of
// 1/local_size of the body run in parallel instead of every rank sending everything across
// the network.
void HierarchicalAllreducer::cross_allreduce(float* data, int count) {
  if (comms_.topo.num_nodes == 1) return;  // the local sum is already the total
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data, count, MPI_FLOAT, MPI_SUM, comms_.cross.get()));
}

// Root path, phase 1 (nodes with different rank counts): shards would not line up across
// nodes, so the node's sum is collected whole on local rank 0.
void HierarchicalAllreducer::root_reduce(float* data, int count) {
  const bool root = comms_.topo.local_rank == 0;
  MPI_CHECK(MPI_Reduce(root ? MPI_IN_PLACE : data, root ? data : nullptr, count, MPI_FLOAT, MPI_SUM,
                       0, comms_.local.get()));
}

// Root path, phase 2: allreduce among the local roots. The cross communicator of local
// rank 0 is exactly the set of local roots, one per node, so no extra split is needed.
void HierarchicalAllreducer::root_cross_allreduce(float* data, int count) {
  if (comms_.topo.local_rank != 0 || comms_.topo.num_nodes == 1) return;
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data, count, MPI_FLOAT, MPI_SUM, comms_.cross.get()));
}

// Root path, phase 3: each root hands the total to the rest of its node.
void HierarchicalAllreducer::root_broadcast(float* data, int count) {
  if (comms_.topo.local_size == 1) return;
  MPI_CHECK(MPI_Bcast(data, count, MPI_FLOAT, 0, comms_.local.get()));
}

void CheckAllreduceKind(const std::string& kind) {
  if (kind != "auto" && kind != "flat" && kind != "hierarchical")
    throw UsageError("--allreduce: must be one of auto, flat, hierarchical, got '" + kind + "'");
}

bool UseHierarchical(const std::string& kind, const Topology& t) {
  CheckAllreduceKind(kind);
  if (kind != "auto") return kind == "hierarchical";
  return t.num_nodes > 1 && *std::max_element(t.ranks_per_node.begin(), t.ranks_per_node.end()) > 1;
}

std::unique_ptr<Allreducer> MakeAllreducer(const std::string& kind, MPI_Comm comm,
                                           const std::vector<std::string>& node_of_rank) {
  CheckAllreduceKind(kind);
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  if (UseHierarchical(kind, MakeTopology(node_of_rank, rank)))
    return std::make_unique<HierarchicalAllreducer>(comm, node_of_rank);
  return std::make_unique<FlatAllreducer>(comm);
}

}  // namespace dlh
