// DLH — in-place sum allreduce of float buffers on host memory, two algorithms behind one
// interface, chosen by an explicit option (dlh-launch train --allreduce).
//
//   flat          one MPI_Allreduce over all ranks: MPI picks its own algorithm.
//   hierarchical  Horovod's scheme with a node-local MPI communicator in place of NCCL:
//                 reduce-scatter inside each node, allreduce of each shard across nodes
//                 (one rank per node per shard, so every rank's link carries 1/local_size of
//                 the data), all-gather inside the node; the few elements left over by
//                 equal shards are allreduced whole in the node, then across nodes. The
//                 shards and that tail are PlanShards' (planner.hpp), the plan the GPU
//                 engine follows with NCCL. Nodes with different rank counts take the root
//                 path: reduce to local rank 0, allreduce among the local roots, broadcast
//                 inside the node.
// The cross-node step is MPI on host memory: this is the CPU path, and it is also what
// Horovod does for its cross-node step when MPI is not CUDA-aware.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "launcher/comm/mpi.hpp"
#include "launcher/comm/planner.hpp"
#include "launcher/comm/topology.hpp"

namespace dlh {

class Allreducer {
 public:
  virtual ~Allreducer();
  // Replaces data[0, count) by its sum over all ranks. Collective: every rank passes the
  // same count (0 is allowed).
  virtual void allreduce(float* data, size_t count) = 0;
  virtual const char* name() const = 0;
};

class FlatAllreducer : public Allreducer {
 public:
  explicit FlatAllreducer(MPI_Comm comm) : comm_(comm) {}
  void allreduce(float* data, size_t count) override;
  const char* name() const override { return "flat"; }

 private:
  mpi::Comm comm_;
};

class HierarchicalAllreducer : public Allreducer {
 public:
  // Collective over `comm`; `node_of_rank` must be the same on every rank.
  HierarchicalAllreducer(MPI_Comm comm, const std::vector<std::string>& node_of_rank);
  void allreduce(float* data, size_t count) override;
  const char* name() const override { return "hierarchical"; }
  const Topology& topology() const { return comms_.topo; }

 private:
  void local_reduce_scatter(const float* data, const ShardPlan& plan);
  void local_all_gather(float* data, const ShardPlan& plan);
  void local_allreduce(float* data, int count);
  void cross_allreduce(float* data, int count);
  void root_reduce(float* data, int count);
  void root_cross_allreduce(float* data, int count);
  void root_broadcast(float* data, int count);

  NodeComms comms_;
  std::vector<float> shard_;       // this rank's shard, reused across calls
  std::vector<int> shard_counts_;  // plan.shard for every local rank
};

// Throws dlh::UsageError unless `kind` is auto, flat or hierarchical.
void CheckAllreduceKind(const std::string& kind);

// auto: hierarchical when there are several nodes and some node has several ranks (only
// then is there a local step to save cross-node traffic), else flat. The rule of both
// engines; throws UsageError on an unknown kind.
bool UseHierarchical(const std::string& kind, const Topology& topology);

// MakeAllreducer is collective over comm.
std::unique_ptr<Allreducer> MakeAllreducer(const std::string& kind, MPI_Comm comm,
                                           const std::vector<std::string>& node_of_rank);

}  // namespace dlh
